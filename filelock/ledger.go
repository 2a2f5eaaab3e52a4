package filelock

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/dlockdev/dlock/driver"
)

var _ driver.Ledger = (*fileDriver)(nil)

const (
	runFenceSQL    = `SELECT fence FROM dlock_run_fences WHERE name = ?1`
	setRunFenceSQL = `INSERT INTO dlock_run_fences (name, fence) VALUES (?1, ?2)
		ON CONFLICT (name) DO UPDATE SET fence = max(fence, excluded.fence)`
	runColumns = `name, slot, schedule, owner, fence, attempt, started, ended, status`
	runSQL     = `SELECT ` + runColumns + ` FROM dlock_runs WHERE name = ?1 AND slot = ?2`
	runsSQL    = `SELECT ` + runColumns + ` FROM dlock_runs WHERE name = ?1 ORDER BY slot DESC`
	putRunSQL  = `INSERT INTO dlock_runs (` + runColumns + `) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
		ON CONFLICT (name, slot) DO UPDATE SET schedule = excluded.schedule, owner = excluded.owner,
		fence = excluded.fence, attempt = excluded.attempt, started = excluded.started, ended = excluded.ended,
		status = excluded.status`
	trimRunsSQL = `DELETE FROM dlock_runs WHERE name = ?1 AND slot NOT IN
		(SELECT slot FROM dlock_runs WHERE name = ?1 ORDER BY slot DESC LIMIT ?2)`
	finishRunSQL = `UPDATE dlock_runs SET ended = ?4, status = ?5 WHERE name = ?1 AND slot = ?2 AND fence = ?3`
)

// ClaimRun implements driver.Ledger, in one write transaction.
func (d *fileDriver) ClaimRun(ctx context.Context, rec driver.RunRecord, rerun bool, keep int) (got driver.RunRecord, claimed bool, err error) {
	err = d.ledgerTx(ctx, rec.Name, rec.Fence, func(tx *sql.Tx) error {
		old, err := scanRun(tx.QueryRowContext(ctx, runSQL, rec.Name, rec.Slot.UnixNano()))
		switch {
		case err == nil && (!rerun || !old.Ended.IsZero() || old.Fence >= rec.Fence):
			got = old
			return nil
		case err != nil && !errors.Is(err, sql.ErrNoRows):
			return err
		}
		if _, err := tx.ExecContext(ctx, putRunSQL, runArgs(rec)...); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, trimRunsSQL, rec.Name, keep); err != nil {
			return err
		}
		got, claimed = rec, true
		return nil
	})
	return got, claimed, err
}

// FinishRun implements driver.Ledger.
func (d *fileDriver) FinishRun(ctx context.Context, rec driver.RunRecord) error {
	return d.ledgerTx(ctx, rec.Name, rec.Fence, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, finishRunSQL, rec.Name, rec.Slot.UnixNano(), int64(rec.Fence), rec.Ended.UnixNano(), rec.Status)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return errors.Join(driver.ErrNotHeld, err)
		}
		return nil
	})
}

// Runs implements driver.Ledger.
func (d *fileDriver) Runs(ctx context.Context, name string) ([]driver.RunRecord, error) {
	rows, err := d.db.QueryContext(ctx, runsSQL, name)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var runs []driver.RunRecord
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, err
		}
		runs = append(runs, r)
	}
	return runs, rows.Err()
}

// ledgerTx runs f in a write transaction after fencing it: a fence below
// the highest name's ledger has seen is refused (driver.ErrNotHeld), and
// a higher one becomes the highest.
func (d *fileDriver) ledgerTx(ctx context.Context, name string, fence uint64, f func(tx *sql.Tx) error) error {
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	var highest int64
	switch err := tx.QueryRowContext(ctx, runFenceSQL, name).Scan(&highest); {
	case err != nil && !errors.Is(err, sql.ErrNoRows):
		return err
	case uint64(highest) > fence:
		return driver.ErrNotHeld
	}
	if _, err := tx.ExecContext(ctx, setRunFenceSQL, name, int64(fence)); err != nil {
		return err
	}
	if err := f(tx); err != nil {
		return err
	}
	return tx.Commit()
}

func runArgs(r driver.RunRecord) []any {
	var ended int64
	if !r.Ended.IsZero() {
		ended = r.Ended.UnixNano()
	}
	return []any{r.Name, r.Slot.UnixNano(), r.Schedule, r.Owner, int64(r.Fence), r.Attempt, r.Started.UnixNano(), ended, r.Status}
}

type scanner interface{ Scan(dest ...any) error }

func scanRun(s scanner) (driver.RunRecord, error) {
	var r driver.RunRecord
	var slot, fence, started, ended int64
	if err := s.Scan(&r.Name, &slot, &r.Schedule, &r.Owner, &fence, &r.Attempt, &started, &ended, &r.Status); err != nil {
		return driver.RunRecord{}, err
	}
	r.Slot, r.Fence, r.Started = time.Unix(0, slot).UTC(), uint64(fence), time.Unix(0, started)
	if ended != 0 {
		r.Ended = time.Unix(0, ended)
	}
	return r, nil
}
