package rediscore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/driver"
	"github.com/redis/go-redis/v9"
)

// The run ledger (driver.Ledger) as both Redis drivers store it: one hash
// per name (Keys.Runs) of records by slot, with the highest fence written,
// and a sorted set of its slots (Keys.RunSlots); written by the ClaimRun
// and FinishRun scripts, read with HGETALL.

// RunsFence is the field of a ledger hash that holds the highest fence a
// ledger write has carried; every other field is a slot (RunField).
const RunsFence = "fence"

// What the ledger scripts answer.
const (
	RunRefused = -1 // the write's fence is below the ledger's highest: nothing written
	RunKept    = 0  // the slot keeps its record (ClaimRun), or has none of the fence (FinishRun)
	RunWritten = 1  // the write is the slot's record now
)

// runJSON is a record as stored: times in Unix nanoseconds (UTC), 0 for
// none; the fence a decimal string, which the scripts compare exactly.
type runJSON struct {
	Slot     int64  `json:"slot"`
	Schedule string `json:"schedule,omitempty"`
	Owner    string `json:"owner"`
	Fence    uint64 `json:"fence,string"`
	Attempt  int    `json:"attempt"`
	Started  int64  `json:"started,omitempty"`
	Ended    int64  `json:"ended,omitempty"`
	Status   string `json:"status,omitempty"`
}

// RunField returns a slot's field in a ledger hash: its Unix nanoseconds
// in 19 digits, so that string order is time order.
func RunField(slot time.Time) (string, error) {
	n, err := nanos("slot", slot)
	if err != nil {
		return "", err
	}
	if n == 0 {
		return "", invalidRun("slot has no time")
	}
	return fmt.Sprintf("%019d", n), nil
}

// EncodeRun returns rec's field and value in its name's ledger hash.
func EncodeRun(rec driver.RunRecord) (field, value string, err error) {
	if rec.Name == "" {
		return "", "", invalidRun("run record has no name")
	}
	if rec.Attempt < 1 {
		return "", "", invalidRun("run of %q: attempt %d, want 1 or more", rec.Name, rec.Attempt)
	}
	if field, err = RunField(rec.Slot); err != nil {
		return "", "", err
	}
	j := runJSON{Schedule: rec.Schedule, Owner: rec.Owner, Fence: rec.Fence, Attempt: rec.Attempt, Status: rec.Status}
	j.Slot, _ = nanos("slot", rec.Slot)
	if j.Started, err = nanos("start", rec.Started); err != nil {
		return "", "", err
	}
	if j.Ended, err = nanos("end", rec.Ended); err != nil {
		return "", "", err
	}
	b, err := json.Marshal(j)
	return field, string(b), err
}

// DecodeRun reads a record of name's ledger.
func DecodeRun(name, value string) (driver.RunRecord, error) {
	var j runJSON
	if err := json.Unmarshal([]byte(value), &j); err != nil || j.Slot <= 0 {
		return driver.RunRecord{}, fmt.Errorf("rediscore: run ledger of %q: record %.64q is not a run record", name, value)
	}
	return driver.RunRecord{Name: name, Slot: fromNanos(j.Slot), Schedule: j.Schedule, Owner: j.Owner, Fence: j.Fence,
		Attempt: j.Attempt, Started: fromNanos(j.Started), Ended: fromNanos(j.Ended), Status: j.Status}, nil
}

// decodeRuns reads name's ledger hash (HGETALL): its records, newest slot
// first.
func decodeRuns(name string, hash map[string]string) ([]driver.RunRecord, error) {
	runs := make([]driver.RunRecord, 0, len(hash))
	for field, value := range hash {
		if field == RunsFence {
			continue
		}
		r, err := DecodeRun(name, value)
		if err != nil {
			return nil, err
		}
		runs = append(runs, r)
	}
	slices.SortFunc(runs, func(a, b driver.RunRecord) int { return b.Slot.Compare(a.Slot) })
	return runs, nil
}

// ReadRuns reads name's ledger on c: its records, newest slot first.
func ReadRuns(ctx context.Context, c redis.Cmdable, k Keys, name string) ([]driver.RunRecord, error) {
	hash, err := c.HGetAll(ctx, k.Runs(name)).Result()
	if err != nil {
		return nil, Classify(err)
	}
	return decodeRuns(name, hash)
}

// RunWrite is a ledger write checked and encoded, ready to send to one
// server or to many (Claim, Finish).
type RunWrite struct {
	Rec  driver.RunRecord
	keys []string
	args []any
}

// ClaimWrite prepares the ClaimRun script's call for rec: with rerun, it
// replaces a record without an outcome whose fence is below rec's; it
// keeps the newest keep slots (at least 1).
func ClaimWrite(k Keys, rec driver.RunRecord, rerun bool, keep int) (RunWrite, error) {
	if keep < 1 {
		return RunWrite{}, invalidRun("keep %d runs of %q: want 1 or more", keep, rec.Name)
	}
	field, value, err := EncodeRun(rec)
	if err != nil {
		return RunWrite{}, err
	}
	flag := "0"
	if rerun {
		flag = "1"
	}
	args := []any{field, strconv.FormatUint(rec.Fence, 10), value, flag, keep}
	return RunWrite{Rec: rec, keys: k.Ledger(rec.Name), args: args}, nil
}

// FinishWrite prepares the FinishRun script's call for rec, a finished run.
func FinishWrite(k Keys, rec driver.RunRecord) (RunWrite, error) {
	field, value, err := EncodeRun(rec)
	if err != nil {
		return RunWrite{}, err
	}
	return RunWrite{Rec: rec, keys: k.Ledger(rec.Name), args: []any{field, strconv.FormatUint(rec.Fence, 10), value}}, nil
}

// Claim runs the ClaimRun script on c. It answers RunWritten (w.Rec is
// the slot's record now), RunKept with the slot's record, or RunRefused.
func (w RunWrite) Claim(ctx context.Context, c redis.Scripter) (int64, driver.RunRecord, error) {
	reply, err := ClaimRun.Run(ctx, c, w.keys, w.args...).Slice()
	if err != nil {
		return 0, driver.RunRecord{}, Classify(err)
	}
	code, ok := int64(0), len(reply) > 0
	if ok {
		code, ok = reply[0].(int64)
	}
	switch {
	case !ok:
	case code == RunWritten:
		return code, w.Rec, nil
	case code == RunKept && len(reply) == 2:
		raw, _ := reply[1].(string)
		r, err := DecodeRun(w.Rec.Name, raw)
		return code, r, err
	case code == RunRefused:
		return code, driver.RunRecord{}, nil
	}
	return 0, driver.RunRecord{}, fmt.Errorf("rediscore: unexpected reply %v to the claim-run script", reply)
}

// Finish runs the FinishRun script on c. It answers RunWritten,
// RunKept (the slot has no record of w's fence) or RunRefused.
func (w RunWrite) Finish(ctx context.Context, c redis.Scripter) (int64, error) {
	n, err := FinishRun.Run(ctx, c, w.keys, w.args...).Int64()
	return n, Classify(err)
}

// Refused is the error of a ledger write of rec that a server refused
// (RunRefused): it wraps driver.ErrNotHeld.
func Refused(rec driver.RunRecord) error {
	return fmt.Errorf("run ledger of %q: fence %d is below the highest a write has carried (a later grant's): %w",
		rec.Name, rec.Fence, driver.ErrNotHeld)
}

// nanos returns t in Unix nanoseconds, 0 for the zero time. Other times
// must lie from 1970 (exclusive) to 2262, the range the ledger stores.
func nanos(what string, t time.Time) (int64, error) {
	if t.IsZero() {
		return 0, nil
	}
	n := t.UnixNano()
	if n <= 0 || !time.Unix(0, n).Equal(t) {
		return 0, invalidRun("run %s %s: out of the range the Redis run ledger stores (after 1970, before 2262)", what, t.Format(time.RFC3339Nano))
	}
	return n, nil
}

func fromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

func invalidRun(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{dlock.ErrInvalidArgument}, args...)...)
}
