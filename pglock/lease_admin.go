package pglock

import (
	"context"
	"errors"
	"fmt"

	"github.com/dlockdev/dlock/driver"
	"github.com/jackc/pgx/v5"
)

// RefreshBatch extends many leases in one statement (driver.BatchRefresher).
func (d *leases) RefreshBatch(ctx context.Context, items []driver.RefreshItem) ([]error, error) {
	names, tokens, micros := batchArgs(items)
	// QueryExecModeExec: planned for these arrays at every call (see
	// batchExec).
	rows, err := d.pool.Query(ctx, d.refreshBatch, batchExec, names, tokens, micros)
	if err != nil {
		return nil, d.classify(err)
	}
	results := make([]error, len(items))
	seen := 0
	var (
		i       int64
		ok      bool
		current *string
	)
	_, err = pgx.ForEachRow(rows, []any{&i, &ok, &current}, func() error {
		if i < 1 || int(i) > len(items) {
			return fmt.Errorf("pglock: batch refresh returned item %d of %d", i, len(items))
		}
		if !ok {
			results[i-1] = notHeld(items[i-1].Token, current)
		}
		seen++
		return nil
	})
	if err == nil && seen != len(items) {
		err = fmt.Errorf("pglock: batch refresh answered %d of %d items", seen, len(items))
	}
	return results, d.classify(err)
}

// batchExec is how the batch statements are sent: as an unnamed
// statement, planned for each call's arrays. As a cached prepared
// statement, Postgres switches to a generic plan after five calls, which
// does not know the arrays' length: a 1,000-lease refresh then took 6–10
// times longer (≈ 200 ms instead of 22 ms), and 10,000 leases at TTL 2 s
// were lost for want of refreshes. Planning costs ≈ 0.2 ms a batch.
const batchExec = pgx.QueryExecModeExec

// batchArgs turns items into the statement's three parallel arrays.
func batchArgs(items []driver.RefreshItem) (names, tokens []string, micros []int64) {
	names = make([]string, len(items))
	tokens = make([]string, len(items))
	micros = make([]int64, len(items))
	for i, it := range items {
		names[i], tokens[i], micros[i] = it.Name, it.Token, it.TTL.Microseconds()
	}
	return names, tokens, micros
}

// List returns the live holders whose names start with prefix, by name.
func (d *leases) List(ctx context.Context, prefix string) ([]driver.Holder, error) {
	rows, err := d.pool.Query(ctx, d.list, prefix)
	if err != nil {
		return nil, d.classify(err)
	}
	var hs []driver.Holder
	var (
		name, owner   string
		fence, micros int64
	)
	_, err = pgx.ForEachRow(rows, []any{&name, &owner, &fence, &micros}, func() error {
		hs = append(hs, holder(name, owner, fence, micros))
		return nil
	})
	return hs, d.classify(err) // pgx reports a failed query here, at the first row
}

// Inspect returns name's live holder; ok is false when it is free.
func (d *leases) Inspect(ctx context.Context, name string) (driver.Holder, bool, error) {
	var (
		n, owner      string
		fence, micros int64
	)
	err := d.pool.QueryRow(ctx, d.inspect, name).Scan(&n, &owner, &fence, &micros)
	if errors.Is(err, pgx.ErrNoRows) {
		return driver.Holder{}, false, nil
	}
	if err != nil {
		return driver.Holder{}, false, d.classify(err)
	}
	return holder(n, owner, fence, micros), true, nil
}

// ForceRelease frees name whoever holds it and gives it a new fence from
// the sequence, so the evicted holder's fenced writes fail from now on.
// The same statement announces the eviction to every WatchEvictions of
// this table (see leaseForceRelease).
func (d *leases) ForceRelease(ctx context.Context, name string) (driver.Holder, bool, uint64, error) {
	var (
		held          bool
		owner         string
		fence, micros int64
		newFence      int64
		notified      int64
	)
	err := d.pool.QueryRow(ctx, d.forceRelease, name, d.evicted).Scan(&held, &owner, &fence, &micros, &newFence, &notified)
	if err != nil {
		return driver.Holder{}, false, 0, d.classify(err)
	}
	if !held {
		return driver.Holder{}, false, uint64(newFence), nil
	}
	return holder(name, owner, fence, micros), true, uint64(newFence), nil
}

// ReleaseBatch (driver.BatchReleaser) frees many leases in one statement.
// Unlike Release it records no released token for a lease it does not
// hold: the batch serves Locker.Close and ReleaseAll, whose leases were
// granted.
func (d *leases) ReleaseBatch(ctx context.Context, items []driver.ReleaseItem) ([]error, error) {
	names := make([]string, len(items))
	tokens := make([]string, len(items))
	for i, it := range items {
		names[i], tokens[i] = it.Name, it.Token
	}
	rows, err := d.pool.Query(ctx, d.releaseBatch, batchExec, names, tokens, d.channel)
	if err != nil {
		return nil, d.classify(err)
	}
	results := make([]error, len(items))
	seen := 0
	var (
		i       int64
		ok      bool
		current *string
		n       int64
	)
	_, err = pgx.ForEachRow(rows, []any{&i, &ok, &current, &n}, func() error {
		if i < 1 || int(i) > len(items) {
			return fmt.Errorf("pglock: batch release returned item %d of %d", i, len(items))
		}
		if !ok {
			results[i-1] = notHeld(items[i-1].Token, current)
		}
		seen++
		return nil
	})
	if err == nil && seen != len(items) {
		err = fmt.Errorf("pglock: batch release answered %d of %d items", seen, len(items))
	}
	return results, d.classify(err)
}
