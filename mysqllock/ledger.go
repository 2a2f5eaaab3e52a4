package mysqllock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/dlockdev/dlock/driver"
)

// The run ledger (driver.Ledger) is the same in both modes: the tables
// <table>_runs and <table>_ledgers (ledger_sql.go), created by Migrate.
//
// Each write is one short REPEATABLE READ transaction that first locks
// the name's ledger row and compares the write's fence with the highest
// the name has seen (fenced): so the writes to one name's ledger run one
// at a time, each decided on the latest records, and a write under an
// older grant changes nothing. As in lease mode, nothing is written until
// the caller's COMMIT, which a caller that gave up never sends.

var (
	_ driver.Ledger = (*leases)(nil)
	_ driver.Ledger = (*getLocks)(nil)
)

// ClaimRun implements driver.Ledger: it records rec unless the slot has a
// record (or, with rerun, replaces a record without an outcome under an
// older fence), then trims the name's records to the newest keep slots.
// The same grant's claim sent again (a retry whose reply was lost) finds
// its own record, and gets it as claimed.
func (b *base) ClaimRun(ctx context.Context, rec driver.RunRecord, rerun bool, keep int) (driver.RunRecord, bool, error) {
	if keep < 1 {
		return driver.RunRecord{}, false, invalidRun("keep %d runs of %q: want 1 or more", keep, rec.Name)
	}
	if err := checkRun(rec); err != nil {
		return driver.RunRecord{}, false, err
	}
	var (
		got  driver.RunRecord
		mine bool
	)
	err := b.fenced(ctx, rec.Name, rec.Fence, func(tx *tx) (err error) {
		got, mine, err = b.claim(ctx, tx, rec, rerun)
		if err == nil && mine {
			err = b.trim(ctx, tx, rec, keep)
		}
		return err
	})
	if err != nil {
		return driver.RunRecord{}, false, err
	}
	return got, mine, nil
}

// claim decides rec's claim inside the fenced transaction.
func (b *base) claim(ctx context.Context, tx *tx, rec driver.RunRecord, rerun bool) (driver.RunRecord, bool, error) {
	var r storedRun
	err := tx.QueryRowContext(ctx, b.sql(ledgerSlot), rec.Name, datetime(rec.Slot)).Scan(r.dest()...)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		_, err = tx.ExecContext(ctx, b.sql(ledgerInsert), append([]any{rec.Name, datetime(rec.Slot)}, runValues(rec)...)...)
		return rec, err == nil, err
	case err != nil:
		return driver.RunRecord{}, false, err
	}
	have := r.record(rec.Name)
	switch {
	case sameClaim(have, rec):
		return have, true, nil
	case rerun && have.Ended.IsZero() && have.Fence < rec.Fence:
		_, err = tx.ExecContext(ctx, b.sql(ledgerReplace), append(runValues(rec), rec.Name, datetime(rec.Slot))...)
		return rec, err == nil, err
	}
	return have, false, nil
}

// trim deletes the name's records beyond the newest keep, never rec's.
func (b *base) trim(ctx context.Context, tx *tx, rec driver.RunRecord, keep int) error {
	var cutoff string
	err := tx.QueryRowContext(ctx, b.sql(ledgerCutoff), rec.Name, keep-1).Scan(&cutoff)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err == nil {
		_, err = tx.ExecContext(ctx, b.sql(ledgerTrim), rec.Name, cutoff, datetime(rec.Slot))
	}
	return err
}

// FinishRun implements driver.Ledger: it records rec's outcome on its
// slot's record if that record is still rec's run (same fence).
func (b *base) FinishRun(ctx context.Context, rec driver.RunRecord) error {
	if err := checkRun(rec); err != nil {
		return err
	}
	return b.fenced(ctx, rec.Name, rec.Fence, func(tx *tx) error {
		var r storedRun
		err := tx.QueryRowContext(ctx, b.sql(ledgerSlot), rec.Name, datetime(rec.Slot)).Scan(r.dest()...)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return errNotOurs
		case err != nil:
			return err
		case r.fence != rec.Fence:
			return errNotOurs
		}
		_, err = tx.ExecContext(ctx, b.sql(ledgerFinish), nullDatetime(rec.Ended), rec.Status, rec.Name, datetime(rec.Slot), rec.Fence)
		return err
	})
}

// errNotOurs is what a fenced step returns when the write's fence is
// current but the record is another run's: the fence raise is committed,
// and the caller gets driver.ErrNotHeld.
var errNotOurs = errors.New("mysqllock: the slot's record is another run's")

// Runs implements driver.Ledger.
func (b *base) Runs(ctx context.Context, name string) ([]driver.RunRecord, error) {
	rows, err := b.db.QueryContext(ctx, b.sql(ledgerRuns), name)
	if err != nil {
		return nil, b.classify(err)
	}
	defer rows.Close()
	var runs []driver.RunRecord
	for rows.Next() {
		var r storedRun
		if err := rows.Scan(r.dest()...); err != nil {
			return nil, b.classify(err)
		}
		runs = append(runs, r.record(name))
	}
	return runs, b.classify(rows.Err())
}

// fenced runs step in a transaction that holds name's ledger row, raised
// to fence: it returns driver.ErrNotHeld without running step when the
// name's highest fence is above fence. A name without a ledger row gets
// one first, committed on its own, and the transaction is made again.
func (b *base) fenced(ctx context.Context, name string, fence uint64, step func(*tx) error) error {
	err := b.fencedTx(ctx, name, fence, step)
	if errors.Is(err, sql.ErrNoRows) {
		if _, err = b.db.ExecContext(ctx, b.sql(ledgerEnsure), name); err != nil {
			return b.classify(err)
		}
		err = b.fencedTx(ctx, name, fence, step)
	}
	switch {
	case errors.Is(err, errNotOurs):
		return driver.ErrNotHeld
	case errors.Is(err, sql.ErrNoRows): // the row went between the two
		return fmt.Errorf("mysqllock: the run ledger row of %q vanished: %w", name, err)
	}
	return b.classify(err)
}

// fencedTx is one attempt of fenced; it returns sql.ErrNoRows when name
// has no ledger row.
func (b *base) fencedTx(ctx context.Context, name string, fence uint64, step func(*tx) error) error {
	tx, err := b.begin(ctx, "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
	if err != nil {
		return err
	}
	defer tx.rollback(ctx)
	var highest uint64
	if err := tx.QueryRowContext(ctx, b.sql(ledgerLock), name).Scan(&highest); err != nil {
		return err
	}
	if highest > fence {
		return driver.ErrNotHeld
	}
	if _, err := tx.ExecContext(ctx, b.sql(ledgerRaise), fence, name, fence); err != nil {
		return err
	}
	stepErr := step(tx)
	if stepErr != nil && !errors.Is(stepErr, errNotOurs) {
		return stepErr
	}
	if err := tx.commit(ctx); err != nil {
		return err
	}
	return stepErr
}

// sameClaim reports whether the stored record have is the claim rec
// itself, written before: a fence is one grant's, which claims a slot
// once.
func sameClaim(have, rec driver.RunRecord) bool {
	return have.Fence == rec.Fence && have.Owner == rec.Owner && have.Attempt == rec.Attempt &&
		have.Started.Equal(rec.Started.Truncate(time.Microsecond))
}

// runValues are rec's columns after its name and slot, in ledgerInsert's
// order.
func runValues(rec driver.RunRecord) []any {
	return []any{rec.Schedule, rec.Owner, rec.Fence, rec.Attempt, datetime(rec.Started), nullDatetime(rec.Ended), rec.Status}
}

// storedRun is a record as ledgerSlot and ledgerRuns read it.
type storedRun struct {
	slot, started           int64
	ended                   sql.NullInt64
	schedule, owner, status string
	fence                   uint64
	attempt                 int
}

func (r *storedRun) dest() []any {
	return []any{&r.slot, &r.schedule, &r.owner, &r.fence, &r.attempt, &r.started, &r.ended, &r.status}
}

func (r *storedRun) record(name string) driver.RunRecord {
	rec := driver.RunRecord{Name: name, Slot: time.UnixMicro(r.slot).UTC(), Schedule: r.schedule, Owner: r.owner,
		Fence: r.fence, Attempt: r.attempt, Started: time.UnixMicro(r.started).UTC(), Status: r.status}
	if r.ended.Valid {
		rec.Ended = time.UnixMicro(r.ended.Int64).UTC()
	}
	return rec
}
