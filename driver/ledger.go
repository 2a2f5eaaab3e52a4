package driver

import (
	"context"
	"time"
)

// RunRecord is one scheduled run in a backend's run ledger: the run of a
// lock name's slot (a schedule point) by the holder of a grant.
type RunRecord struct {
	// Name is the lock name the job runs under.
	Name string
	// Slot is the schedule point the run belongs to (UTC).
	Slot time.Time
	// Schedule names the schedule the slot was taken from ("every 1h", a
	// cron expression), so that a reader can tell the slots no host ran.
	Schedule string
	// Owner is the holder that ran it (host/pid by default).
	Owner string
	// Fence is the grant the run was claimed under.
	Fence uint64
	// Attempt counts the runs of this slot: 1, or more when a crashed run
	// was run again.
	Attempt int
	// Started is when the run began, by the runner's clock.
	Started time.Time
	// Ended is when its outcome was recorded; zero while it runs, and for
	// ever when its runner died first.
	Ended time.Time
	// Status is the outcome ("ok", "exit 3", "lease lost: expired"),
	// empty while there is none.
	Status string
}

// Ledger is implemented by backends that keep a durable record of
// scheduled runs beside their locks (Locker.RunOnce, `dlock run
// --once-per`): which host ran each slot of a name, under which fence,
// when, and how it ended. Writes are fenced: a write whose Fence is below
// the highest the name's ledger has seen is refused with ErrNotHeld, so a
// holder that lost its lock while paused cannot overwrite its successor's
// record. The portable layer calls ClaimRun and FinishRun only while it
// holds the name's lock under that fence.
type Ledger interface {
	// ClaimRun records rec as the run of its slot, unless the slot has a
	// record: then it returns that record and false. With rerun, a record
	// without an outcome whose Fence is below rec.Fence (its runner's
	// lease is gone, since rec's holder has the lock now) is replaced,
	// rec.Attempt being set by the caller. It keeps the newest keep slots
	// of the name and drops older ones.
	ClaimRun(ctx context.Context, rec RunRecord, rerun bool, keep int) (RunRecord, bool, error)
	// FinishRun records rec's outcome (Ended, Status) on the record of
	// its slot, if that record is still rec's run (same Fence).
	FinishRun(ctx context.Context, rec RunRecord) error
	// Runs returns name's records, newest slot first.
	Runs(ctx context.Context, name string) ([]RunRecord, error)
}
