package pglock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/driver"
	"github.com/jackc/pgx/v5"
)

// The run ledger (driver.Ledger) is the same in both modes: the tables
// <table>_runs and <table>_ledgers (ledger_sql.go), created by Migrate,
// each call one statement on a pool connection.

// ClaimRun implements driver.Ledger, in one statement (ledgerClaim): it
// fences the write, records rec unless the slot has a record (or, with
// rerun, replaces a record without an outcome under an older fence), and
// trims the name's records to the newest keep slots. A slot must be a
// whole number of microseconds, which is what PostgreSQL keeps.
func (b *base) ClaimRun(ctx context.Context, rec driver.RunRecord, rerun bool, keep int) (driver.RunRecord, bool, error) {
	if err := wholeMicros(rec.Slot); err != nil {
		return driver.RunRecord{}, false, err
	}
	var (
		mine bool
		got  storedRun
	)
	err := b.pool.QueryRow(ctx, b.sql(ledgerClaim), rec.Name, int64(rec.Fence), rec.Slot, rec.Schedule, rec.Owner,
		rec.Attempt, rec.Started, nullTime(rec.Ended), rec.Status, rerun, int64(keep)).Scan(append([]any{&mine}, got.dest()...)...)
	switch {
	case errors.Is(err, pgx.ErrNoRows): // the fence step refused the write
		return driver.RunRecord{}, false, driver.ErrNotHeld
	case err != nil:
		return driver.RunRecord{}, false, b.classify(err)
	case mine:
		return rec, true, nil
	}
	return got.record(rec.Name), false, nil
}

// FinishRun implements driver.Ledger, in one statement (ledgerFinish).
func (b *base) FinishRun(ctx context.Context, rec driver.RunRecord) error {
	tag, err := b.pool.Exec(ctx, b.sql(ledgerFinish), rec.Name, int64(rec.Fence), rec.Slot, nullTime(rec.Ended), rec.Status)
	if err != nil {
		return b.classify(err)
	}
	if tag.RowsAffected() == 0 {
		return driver.ErrNotHeld
	}
	return nil
}

// Runs implements driver.Ledger.
func (b *base) Runs(ctx context.Context, name string) ([]driver.RunRecord, error) {
	rows, err := b.pool.Query(ctx, b.sql(ledgerRuns), name)
	if err != nil {
		return nil, b.classify(err)
	}
	var runs []driver.RunRecord
	var r storedRun
	_, err = pgx.ForEachRow(rows, r.dest(), func() error {
		runs = append(runs, r.record(name))
		return nil
	})
	return runs, b.classify(err) // pgx reports a failed query here, at the first row
}

// storedRun is a record as a statement returns it (runColumns).
type storedRun struct {
	slot, started           time.Time
	ended                   *time.Time
	schedule, owner, status string
	fence                   int64
	attempt                 int32
}

func (r *storedRun) dest() []any {
	return []any{&r.slot, &r.schedule, &r.owner, &r.fence, &r.attempt, &r.started, &r.ended, &r.status}
}

func (r *storedRun) record(name string) driver.RunRecord {
	rec := driver.RunRecord{Name: name, Slot: r.slot.UTC(), Schedule: r.schedule, Owner: r.owner, Fence: uint64(r.fence),
		Attempt: int(r.attempt), Started: r.started, Status: r.status}
	if r.ended != nil {
		rec.Ended = *r.ended
	}
	return rec
}

// nullTime is t, or NULL for the zero time (a run without an outcome).
func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// wholeMicros refuses a slot that PostgreSQL would round: two slots a
// nanosecond apart would be one record, and a slot read back would not
// equal the one claimed.
func wholeMicros(slot time.Time) error {
	if slot.Nanosecond()%1000 != 0 {
		return driver.Permanent(fmt.Errorf("%w: slot %s has a fraction of a microsecond; the PostgreSQL run ledger keeps slots to the microsecond",
			dlock.ErrInvalidArgument, slot.UTC().Format(time.RFC3339Nano)))
	}
	return nil
}
