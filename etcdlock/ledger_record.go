package etcdlock

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/driver"
)

// runsDir is the directory, under the prefix, of the run ledger: PREFIX +
// "%runs/" + escape(NAME) holds the highest fence a write to NAME's ledger
// has carried, and PREFIX + "%runs/" + escape(NAME) + "/" + SLOT each of
// its records. Like the eviction records' "%evicted/", a bare "%" is
// something no path-escaped lock name yields: no lock's directory contains
// a ledger key (an acquire of a lock named "runs" sees only its own
// contenders), and List skips the ledger's keys (they do not unescape).
const runsDir = "%runs/"

// slotDigits is the width of a slot in its key: Unix nanoseconds in 19
// digits (the int64 range), so that key order is time order.
const slotDigits = 19

// fenceDigits is the width of the fence key's value: a uint64 in 20
// digits, so that etcd's byte-wise compare of values is numeric.
const fenceDigits = 20

// runFence is the key that holds the highest fence of name's ledger.
func (k keyspace) runFence(name string) string { return k.prefix + runsDir + url.PathEscape(name) }

// runDir is the key prefix of name's records (and of no other name's: an
// escaped name has no "/").
func (k keyspace) runDir(name string) string { return k.runFence(name) + "/" }

// runKey is the key of the record of name's slot, given in Unix
// nanoseconds (slotNanos).
func (k keyspace) runKey(name string, slot int64) string {
	return k.runDir(name) + fmt.Sprintf("%0*d", slotDigits, slot)
}

// padFence is a fence as the fence key stores it.
func padFence(f uint64) string { return fmt.Sprintf("%0*d", fenceDigits, f) }

// parseFence reads the fence key's value.
func parseFence(name string, v []byte) (uint64, error) {
	f, err := strconv.ParseUint(string(v), 10, 64)
	if err != nil || len(v) != fenceDigits {
		return 0, fmt.Errorf("etcd: run ledger of %q: fence key holds %.40q, not a %d-digit fence", name, v, fenceDigits)
	}
	return f, nil
}

// storedRun is a record as its key's value holds it: JSON, times in
// RFC 3339 (UTC, nanoseconds), absent when zero, so that `etcdctl get`
// shows it readably.
type storedRun struct {
	Slot     time.Time `json:"slot"`
	Schedule string    `json:"schedule,omitempty"`
	Owner    string    `json:"owner"`
	Fence    uint64    `json:"fence"`
	Attempt  int       `json:"attempt"`
	Started  time.Time `json:"started,omitzero"`
	Ended    time.Time `json:"ended,omitzero"`
	Status   string    `json:"status,omitempty"`
}

// encodeRun checks rec and returns its slot in Unix nanoseconds and its
// key's value.
func encodeRun(rec driver.RunRecord) (slot int64, value string, err error) {
	switch {
	case rec.Name == "":
		return 0, "", invalidRun("run record has no name")
	case rec.Attempt < 1:
		return 0, "", invalidRun("run of %q: attempt %d, want 1 or more", rec.Name, rec.Attempt)
	}
	if slot, err = slotNanos(rec.Slot); err != nil {
		return 0, "", err
	}
	if err := inYears("start", rec.Started); err != nil {
		return 0, "", err
	}
	if err := inYears("end", rec.Ended); err != nil {
		return 0, "", err
	}
	b, err := json.Marshal(storedRun{Slot: rec.Slot.UTC(), Schedule: rec.Schedule, Owner: rec.Owner, Fence: rec.Fence,
		Attempt: rec.Attempt, Started: rec.Started.UTC(), Ended: rec.Ended.UTC(), Status: rec.Status})
	return slot, string(b), err
}

// slotNanos is slot in Unix nanoseconds, refusing what a key cannot order:
// the zero time, and times before 1970 or after 2262.
func slotNanos(slot time.Time) (int64, error) {
	if slot.IsZero() {
		return 0, invalidRun("slot has no time")
	}
	n := slot.UnixNano()
	if n <= 0 || !time.Unix(0, n).Equal(slot) {
		return 0, invalidRun("run slot %s: out of the range the etcd run ledger stores (after 1970, before 2262)", slot.UTC().Format(time.RFC3339Nano))
	}
	return n, nil
}

// inYears refuses a time that RFC 3339 cannot write (zero is none).
func inYears(what string, t time.Time) error {
	if y := t.UTC().Year(); !t.IsZero() && (y < 1 || y > 9999) {
		return invalidRun("run %s %s: out of the range the etcd run ledger stores (years 1 to 9999)", what, t.Format(time.RFC3339Nano))
	}
	return nil
}

// decodeRun reads a record of name's ledger from the value of key.
func decodeRun(name string, key, value []byte) (driver.RunRecord, error) {
	var s storedRun
	if err := json.Unmarshal(value, &s); err != nil || s.Slot.IsZero() {
		return driver.RunRecord{}, fmt.Errorf("etcd: run ledger of %q: key %q holds %.64q, not a run record", name, key, value)
	}
	return driver.RunRecord{Name: name, Slot: s.Slot.UTC(), Schedule: s.Schedule, Owner: s.Owner, Fence: s.Fence,
		Attempt: s.Attempt, Started: s.Started, Ended: s.Ended, Status: s.Status}, nil
}

// invalidRun is a ledger write refused before it is sent: retrying cannot
// cure it.
func invalidRun(format string, args ...any) error {
	return driver.Permanent(fmt.Errorf("%w: "+format, append([]any{dlock.ErrInvalidArgument}, args...)...))
}
