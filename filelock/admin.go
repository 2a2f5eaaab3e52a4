package filelock

import (
	"context"
	"database/sql"
	"errors"

	"github.com/dlockdev/dlock/driver"
)

const listSQL = `SELECT name, owner, fence, expires_at - ` + nowMS + `
FROM dlock_leases
WHERE token IS NOT NULL AND expires_at > ` + nowMS + ` AND name >= ?1 AND (?2 = '' OR name < ?2)
ORDER BY name`

const inspectSQL = `SELECT owner, fence, expires_at - ` + nowMS + `
FROM dlock_leases WHERE name = ?1 AND token IS NOT NULL AND expires_at > ` + nowMS

// forceSQL frees name whoever holds it and bumps its fence (creating the
// row if the name was never locked, so the bump is never lost).
const forceSQL = `INSERT INTO dlock_leases (name, token, owner, fence, expires_at, freed)
VALUES (?1, NULL, '', ` + newFence + `, ` + nowMS + `, (SELECT coalesce(max(freed), 0) + 1 FROM dlock_leases))
ON CONFLICT (name) DO UPDATE SET token = NULL, owner = '', expires_at = excluded.expires_at,
	fence = fence + 1, freed = excluded.freed
RETURNING fence, freed`

// List returns the live holders whose names start with prefix, by name.
func (d *fileDriver) List(ctx context.Context, prefix string) ([]driver.Holder, error) {
	rows, err := d.db.QueryContext(ctx, listSQL, prefix, prefixEnd(prefix))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var hs []driver.Holder
	for rows.Next() {
		var h driver.Holder
		var fence, left int64
		if err := rows.Scan(&h.Name, &h.Owner, &fence, &left); err != nil {
			return nil, err
		}
		h.Fence, h.TTL = uint64(fence), msDuration(left)
		hs = append(hs, h)
	}
	return hs, rows.Err()
}

// prefixEnd is the smallest string above every string starting with
// prefix, for an index range scan; "" means no upper bound. Names are valid
// UTF-8, which never contains the byte 0xff.
func prefixEnd(prefix string) string {
	if prefix == "" {
		return ""
	}
	return prefix + "\xff"
}

// Inspect returns the live holder of name; ok is false when it is free.
func (d *fileDriver) Inspect(ctx context.Context, name string) (driver.Holder, bool, error) {
	h, err := scanHolder(d.db.QueryRowContext(ctx, inspectSQL, name))
	if errors.Is(err, sql.ErrNoRows) {
		return driver.Holder{}, false, nil
	}
	h.Name = name
	return h, err == nil, err
}

// ForceRelease evicts name's holder and bumps its fence in one write
// transaction, waking waiters like a release; the eviction is recorded in
// the same transaction, for the eviction watchers of every process
// (evictions.go).
func (d *fileDriver) ForceRelease(ctx context.Context, name string) (driver.Holder, bool, uint64, error) {
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return driver.Holder{}, false, 0, err
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	evicted, err := scanHolder(tx.QueryRowContext(ctx, inspectSQL, name))
	ok := err == nil
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return driver.Holder{}, false, 0, err
	}
	evicted.Name = name
	var fence, freed int64
	if err := tx.QueryRowContext(ctx, forceSQL, name).Scan(&fence, &freed); err != nil {
		return driver.Holder{}, false, 0, err
	}
	e := driver.Eviction{Name: name, Fence: evicted.Fence}
	if ok {
		if err := recordEviction(ctx, tx, e); err != nil {
			return driver.Holder{}, false, 0, err
		}
	}
	if err := tx.Commit(); err != nil {
		return driver.Holder{}, false, 0, err
	}
	if ok {
		d.watch.forceReleased(e)
	}
	d.watch.released(name, freed)
	d.maybePrune(ctx)
	return evicted, ok, uint64(fence), nil
}

// RefreshBatch refreshes many leases in one write transaction.
func (d *fileDriver) RefreshBatch(ctx context.Context, items []driver.RefreshItem) ([]error, error) {
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	refresh, state := tx.StmtContext(ctx, d.stmts.refresh), tx.StmtContext(ctx, d.stmts.state)
	results := make([]error, len(items))
	for i, it := range items {
		res, err := refresh.ExecContext(ctx, it.Name, it.Token, millis(it.TTL))
		if results[i] = checked(ctx, state, res, err, it.Name, it.Token); isTransport(results[i]) {
			return nil, results[i]
		}
	}
	return results, tx.Commit()
}

// isTransport tells a database failure from a token check's answer.
func isTransport(err error) bool {
	return err != nil && !errors.Is(err, driver.ErrNotHeld)
}
