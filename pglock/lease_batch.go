package pglock

import (
	"context"
	"fmt"

	"github.com/dlockdev/dlock/driver"
	"github.com/jackc/pgx/v5"
)

// A batch statement changes the rows it can and returns the ordinal of
// each item it changed; the items it left alone are looked up afterwards
// (leaseTokens), in a second statement that only a lost lease pays, to
// tell an expired lease from one taken over. The statement used to
// answer every item itself, joining its own result and then the table
// back to its items: its plan hashed the whole lease table twice for
// each batch. With 100,000 leases a batch of 1,000 took 95–160 ms
// (6–9 ms now), and 100,000 leases at TTL 6 s, which need 50 such
// batches a second, were lost by the tens of thousands.

// RefreshBatch extends many leases in one statement (driver.BatchRefresher).
func (d *leases) RefreshBatch(ctx context.Context, items []driver.RefreshItem) ([]error, error) {
	names, tokens, micros := batchArgs(items)
	// QueryExecModeExec: planned for these arrays at every call (see
	// batchExec).
	rows, err := d.pool.Query(ctx, d.refreshBatch, batchExec, names, tokens, micros)
	if err != nil {
		return nil, d.classify(err)
	}
	done, err := d.ordinals(rows, len(items), "refresh", 1)
	if err != nil {
		return nil, err
	}
	return d.misses(ctx, names, tokens, done)
}

// ReleaseBatch (driver.BatchReleaser) frees many leases in one statement,
// handing each to the head of its queue of waiters as Release does.
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
	done, err := d.ordinals(rows, len(items), "release", 2)
	if err != nil {
		return nil, err
	}
	return d.misses(ctx, names, tokens, done)
}

// ordinals reads a batch statement's rows, whose first of cols columns
// is the 1-based ordinal of an item it changed, into one flag per item.
func (d *leases) ordinals(rows pgx.Rows, n int, what string, cols int) ([]bool, error) {
	done := make([]bool, n)
	var i int64
	dest := make([]any, cols)
	dest[0] = &i
	for c := 1; c < cols; c++ {
		dest[c] = new(any)
	}
	_, err := pgx.ForEachRow(rows, dest, func() error {
		if i < 1 || int(i) > n || done[i-1] {
			return fmt.Errorf("pglock: batch %s returned item %d of %d", what, i, n)
		}
		done[i-1] = true
		return nil
	})
	return done, d.classify(err) // pgx reports a failed statement here
}

// misses answers a batch: nil for each item done, and for the others
// whether the lease expired or was taken over, from the name's current
// token (leaseTokens). The lookup is a statement of its own, sent only
// when an item was not done.
func (d *leases) misses(ctx context.Context, names, tokens []string, done []bool) ([]error, error) {
	results := make([]error, len(done))
	var at []int
	var missed []string
	for i, ok := range done {
		if !ok {
			at = append(at, i)
			missed = append(missed, names[i])
		}
	}
	if len(missed) == 0 {
		return results, nil
	}
	rows, err := d.pool.Query(ctx, d.tokens, batchExec, missed)
	if err != nil {
		return nil, d.classify(err)
	}
	seen := 0
	var (
		i       int64
		current *string
	)
	_, err = pgx.ForEachRow(rows, []any{&i, &current}, func() error {
		if i < 1 || int(i) > len(at) {
			return fmt.Errorf("pglock: token look-up returned item %d of %d", i, len(at))
		}
		k := at[i-1]
		results[k] = notHeld(tokens[k], current)
		seen++
		return nil
	})
	if err == nil && seen != len(at) {
		err = fmt.Errorf("pglock: token look-up answered %d of %d items", seen, len(at))
	}
	if err != nil {
		return nil, d.classify(err)
	}
	return results, nil
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
