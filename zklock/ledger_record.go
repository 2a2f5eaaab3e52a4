package zklock

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/driver"
)

// ledgerDirName is the child of the root that holds every name's run
// ledger. No lock's znode can have this name: escapeName writes every
// "%" as "%25", and "%ru" is no escape, so List skips it too.
const ledgerDirName = "%runs"

// ledgerRoot is the znode of every name's run ledger.
func (d *zkDriver) ledgerRoot() string { return d.root + "/" + ledgerDirName }

// ledgerDir is name's run ledger: a persistent znode whose data is the
// highest fence a write to it has carried (decimal), with one persistent
// child per recorded slot. The name is escaped as for its lock's znode.
func (d *zkDriver) ledgerDir(name string) string { return d.ledgerRoot() + "/" + escapeName(name) }

// slotDigits is the width of a slot znode's name: the slot's Unix
// nanoseconds, zero-padded, so that name order is time order.
const slotDigits = 19

// slotName returns slot's znode name, refusing a slot outside the range
// it can hold (after 1970, before 2262), the zero time included.
func slotName(name string, slot time.Time) (string, error) {
	n := slot.UnixNano()
	if n <= 0 || !time.Unix(0, n).Equal(slot) {
		return "", invalidRun("run of %q: slot %s is outside the range the ZooKeeper run ledger keeps (after 1970, before 2262)",
			name, slot.UTC().Format(time.RFC3339Nano))
	}
	return fmt.Sprintf("%0*d", slotDigits, n), nil
}

// isSlotName reports whether a child of a ledger znode is a slot's.
func isSlotName(child string) bool {
	if len(child) != slotDigits {
		return false
	}
	n, err := strconv.ParseInt(child, 10, 64)
	return err == nil && n > 0
}

// runJSON is a record as a slot znode holds it: readable with zkCli's
// get, times in RFC 3339, the fence a decimal string (it exceeds 2^53).
type runJSON struct {
	Slot     time.Time `json:"slot"`
	Schedule string    `json:"schedule,omitempty"`
	Owner    string    `json:"owner"`
	Fence    uint64    `json:"fence,string"`
	Attempt  int       `json:"attempt"`
	Started  time.Time `json:"started,omitzero"`
	Ended    time.Time `json:"ended,omitzero"`
	Status   string    `json:"status,omitempty"`
}

// encodeRun checks rec and returns its slot's znode name and data.
func encodeRun(rec driver.RunRecord) (slot string, data []byte, err error) {
	if rec.Name == "" {
		return "", nil, invalidRun("run record has no name")
	}
	if slot, err = slotName(rec.Name, rec.Slot); err != nil {
		return "", nil, err
	}
	if rec.Attempt < 1 {
		return "", nil, invalidRun("run of %q: attempt %d, want 1 or more", rec.Name, rec.Attempt)
	}
	data, err = json.Marshal(runJSON{Slot: rec.Slot.UTC(), Schedule: rec.Schedule, Owner: rec.Owner, Fence: rec.Fence,
		Attempt: rec.Attempt, Started: rec.Started.Round(0), Ended: rec.Ended.Round(0), Status: rec.Status})
	if err != nil { // a time past year 9999
		return "", nil, invalidRun("run of %q: %v", rec.Name, err)
	}
	return slot, data, nil
}

// decodeRun reads the record a slot znode of name's ledger holds.
func decodeRun(name string, data []byte) (driver.RunRecord, error) {
	var j runJSON
	if err := json.Unmarshal(data, &j); err != nil || j.Slot.IsZero() {
		return driver.RunRecord{}, fmt.Errorf("zookeeper: run ledger of %q: %.64q is not a run record", name, data)
	}
	return driver.RunRecord{Name: name, Slot: j.Slot.UTC(), Schedule: j.Schedule, Owner: j.Owner, Fence: j.Fence,
		Attempt: j.Attempt, Started: j.Started, Ended: j.Ended, Status: j.Status}, nil
}

// sameRun reports whether two records are the same write: a claim or an
// outcome sent again after its reply was lost finds itself recorded.
func sameRun(a, b driver.RunRecord) bool {
	return a.Slot.Equal(b.Slot) && a.Schedule == b.Schedule && a.Owner == b.Owner && a.Fence == b.Fence &&
		a.Attempt == b.Attempt && a.Started.Equal(b.Started) && a.Ended.Equal(b.Ended) && a.Status == b.Status
}

// refused is the error of a write under a fence below the highest the
// name's ledger has seen.
func refused(rec driver.RunRecord, highest uint64) error {
	return fmt.Errorf("zookeeper: run ledger of %q: fence %d is below the highest a write has carried (%d, a later grant's): %w",
		rec.Name, rec.Fence, highest, driver.ErrNotHeld)
}

// noRun is FinishRun's error when the slot's record is not rec's run.
func noRun(rec driver.RunRecord) error {
	return fmt.Errorf("zookeeper: run ledger of %q has no run of slot %s under fence %d (dropped, or run again): %w",
		rec.Name, rec.Slot.UTC().Format(time.RFC3339Nano), rec.Fence, driver.ErrNotHeld)
}

func invalidRun(format string, args ...any) error {
	return driver.Permanent(fmt.Errorf("%w: "+format, append([]any{dlock.ErrInvalidArgument}, args...)...))
}
