package pglock

import (
	"context"
	"errors"

	"github.com/dlockdev/dlock/driver"
	"github.com/jackc/pgx/v5"
)

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
