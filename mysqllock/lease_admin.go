package mysqllock

import (
	"context"
	"database/sql"
	"errors"
	"strings"

	"github.com/dlockdev/dlock/driver"
)

var (
	_ driver.Lister         = (*leases)(nil)
	_ driver.ForceReleaser  = (*leases)(nil)
	_ driver.BatchRefresher = (*leases)(nil)
	_ driver.BatchReleaser  = (*leases)(nil)
	_ driver.Adopter        = (*leases)(nil)
)

// List returns the live holders whose names start with prefix, by name.
func (d *leases) List(ctx context.Context, prefix string) ([]driver.Holder, error) {
	rows, err := d.db.QueryContext(ctx, d.list, prefix, prefix)
	if err != nil {
		return nil, d.classify(err)
	}
	defer rows.Close()
	var hs []driver.Holder
	for rows.Next() {
		var (
			name string
			r    row
		)
		if err := rows.Scan(&name, &r.owner, &r.fence, &r.micros); err != nil {
			return nil, err
		}
		hs = append(hs, r.holder(name))
	}
	return hs, d.classify(rows.Err())
}

// Inspect returns name's live holder; ok is false when it is free.
func (d *leases) Inspect(ctx context.Context, name string) (driver.Holder, bool, error) {
	var (
		n string
		r row
	)
	err := d.db.QueryRowContext(ctx, d.inspect, name).Scan(&n, &r.owner, &r.fence, &r.micros)
	if errors.Is(err, sql.ErrNoRows) {
		return driver.Holder{}, false, nil
	}
	if err != nil {
		return driver.Holder{}, false, d.classify(err)
	}
	return r.holder(n), true, nil
}

// ForceRelease frees name whoever holds it and gives its row the next
// fence, in one transaction, so that a fence-checking resource
// that has seen the next holder's fence (or this one) rejects the evicted
// holder's writes. The evicted holder learns at its next refresh (within
// a third of its TTL), which finds its token gone: MySQL has no channel
// to push the eviction on.
func (d *leases) ForceRelease(ctx context.Context, name string) (driver.Holder, bool, uint64, error) {
	if _, err := d.db.ExecContext(ctx, d.ensureRow, name); err != nil {
		return driver.Holder{}, false, 0, d.classify(err)
	}
	tx, err := d.begin(ctx)
	if err != nil {
		return driver.Holder{}, false, 0, d.classify(err)
	}
	defer tx.rollback(ctx)
	var r row
	if err := tx.QueryRowContext(ctx, d.lockRow, name).Scan(&r.token, &r.owner, &r.fence, &r.micros); err != nil {
		return driver.Holder{}, false, 0, d.classify(err)
	}
	fence := r.fence + 1
	_, err = tx.ExecContext(ctx, d.evict, fence, name)
	if err == nil {
		err = tx.commit(ctx)
	}
	if err != nil {
		return driver.Holder{}, false, 0, d.classify(err)
	}
	if !r.live() {
		return driver.Holder{}, false, fence, nil
	}
	return r.holder(name), true, fence, nil
}

// Adopt extends token's lease, as Refresh does, and reads its fence back.
// A lease is a row, owned by no connection: the adopter's pool keeps it
// from then on.
func (d *leases) Adopt(ctx context.Context, req driver.Request, _ uint64) (driver.Grant, error) {
	if err := d.Refresh(ctx, req.Name, req.Token, req.TTL); err != nil {
		return driver.Grant{}, err
	}
	var r row
	err := d.db.QueryRowContext(ctx, d.adoptRead, req.Name, req.Token).Scan(&r.fence, &r.micros)
	if errors.Is(err, sql.ErrNoRows) {
		return driver.Grant{}, d.whyNot(ctx, req.Name, req.Token)
	}
	if err != nil {
		return driver.Grant{}, d.classify(err)
	}
	return driver.Grant{Acquired: true, Fence: r.fence}, nil
}

// batchMax bounds the items of one batch statement (placeholders).
const batchMax = 500

// RefreshBatch (driver.BatchRefresher) extends many leases in one
// transaction per batchMax items: the rows read under their locks, then
// one UPDATE of those the tokens hold.
func (d *leases) RefreshBatch(ctx context.Context, items []driver.RefreshItem) ([]error, error) {
	results := make([]error, len(items))
	for lo := 0; lo < len(items); lo += batchMax {
		chunk := items[lo:min(lo+batchMax, len(items))]
		names, tokens := make([]string, len(chunk)), make([]string, len(chunk))
		micros := make([]int64, len(chunk))
		for i, it := range chunk {
			names[i], tokens[i], micros[i] = it.Name, it.Token, it.TTL.Microseconds()
		}
		if err := d.batch(ctx, names, tokens, micros, results[lo:]); err != nil {
			return nil, err
		}
	}
	return results, nil
}

// ReleaseBatch (driver.BatchReleaser) frees many leases in one
// transaction per batchMax items, then their wake keys.
func (d *leases) ReleaseBatch(ctx context.Context, items []driver.ReleaseItem) ([]error, error) {
	defer func() {
		for _, it := range items {
			d.keys.give(ctx, it.Token)
		}
	}()
	results := make([]error, len(items))
	for lo := 0; lo < len(items); lo += batchMax {
		chunk := items[lo:min(lo+batchMax, len(items))]
		names, tokens := make([]string, len(chunk)), make([]string, len(chunk))
		for i, it := range chunk {
			names[i], tokens[i] = it.Name, it.Token
		}
		if err := d.batch(ctx, names, tokens, nil, results[lo:]); err != nil {
			return nil, err
		}
	}
	return results, nil
}

// batch refreshes (micros given: each item's TTL) or releases (micros
// nil) the items in one transaction, writing each item's outcome to
// results: nil, or why its token does not hold it. A release frees an
// expired lease that nobody took over, as Release does.
func (d *leases) batch(ctx context.Context, names, tokens []string, micros []int64, results []error) error {
	tx, err := d.begin(ctx)
	if err != nil {
		return d.classify(err)
	}
	defer tx.rollback(ctx)
	current, err := d.lockRows(ctx, tx, names)
	if err != nil {
		return d.classify(err)
	}
	var held []int
	for i := range names {
		r := current[names[i]]
		switch {
		case r.token.String != tokens[i] || !r.token.Valid:
			results[i] = notHeld(tokens[i], r.token)
		case micros != nil && r.micros <= 0:
			results[i] = driver.ErrExpired
		default:
			held = append(held, i)
		}
	}
	if len(held) > 0 {
		if _, err := tx.ExecContext(ctx, d.batchUpdate(len(held), micros != nil), batchArgs(held, names, micros)...); err != nil {
			return d.classify(err)
		}
	}
	return d.classify(tx.commit(ctx))
}

// lockRows reads names' rows under their locks, in name order.
func (d *leases) lockRows(ctx context.Context, tx *tx, names []string) (map[string]row, error) {
	args := make([]any, len(names))
	for i, n := range names {
		args[i] = n
	}
	q := d.sql(`SELECT name, token, owner, fence, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at)
		FROM {{table}} WHERE name IN (` + placeholders(len(names)) + `) ORDER BY name FOR UPDATE`)
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	m := make(map[string]row, len(names))
	for rows.Next() {
		var (
			name string
			r    row
		)
		if err := rows.Scan(&name, &r.token, &r.owner, &r.fence, &r.micros); err != nil {
			return nil, err
		}
		m[name] = r
	}
	return m, rows.Err()
}

// batchUpdate is the UPDATE of n locked rows: extended by each one's
// microseconds (refresh), or freed.
func (d *leases) batchUpdate(n int, refresh bool) string {
	if refresh {
		sel := strings.Repeat(" UNION ALL SELECT ?, ?", n-1)
		return d.sql(`UPDATE {{table}} t JOIN (SELECT ? AS n, ? AS m` + sel + `) r ON t.name = r.n
			SET t.expires_at = UTC_TIMESTAMP(6) + INTERVAL r.m MICROSECOND`)
	}
	return d.sql(`UPDATE {{table}} SET token = NULL, owner = '', expires_at = UTC_TIMESTAMP(6)
		WHERE name IN (` + placeholders(n) + `)`)
}

func batchArgs(held []int, names []string, micros []int64) []any {
	var args []any
	for _, i := range held {
		args = append(args, names[i])
		if micros != nil {
			args = append(args, micros[i])
		}
	}
	return args
}

func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?,", n), ",")
}
