package pglock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlockdev/dlock/driver"
	"github.com/jackc/pgx/v5"
)

// List returns the held dlock locks whose names start with prefix: the
// holders rows whose backend holds their key now. Advisory locks taken
// by other programs have no name and are not listed.
func (d *advisory) List(ctx context.Context, prefix string) ([]driver.Holder, error) {
	rows, err := d.pool.Query(ctx, d.sql(advisoryHeld), prefix)
	if err != nil {
		return nil, d.classify(err)
	}
	var hs []driver.Holder
	var h driver.Holder
	var fence int64
	_, err = pgx.ForEachRow(rows, []any{&h.Name, &h.Owner, &fence}, func() error {
		hs = append(hs, driver.Holder{Name: h.Name, Owner: h.Owner, Fence: uint64(fence), TTL: -1})
		return nil
	})
	return hs, d.classify(err)
}

// Inspect returns name's holder when its advisory key is held.
func (d *advisory) Inspect(ctx context.Context, name string) (driver.Holder, bool, error) {
	_, h, ok, err := d.holder(ctx, name)
	return h, ok, err
}

// holder finds the backend holding name's key and what the holders table
// says about it. A dlock holder publishes its row watchDelay after its
// grant, so a holder without one is asked again until then; after that,
// it is described by its backend pid (a lock taken by another program).
func (d *advisory) holder(ctx context.Context, name string) (uint32, driver.Holder, bool, error) {
	key := Key(name)
	deadline := time.Now().Add(2*watchDelay + 100*time.Millisecond)
	for {
		var h heldBy
		err := d.pool.QueryRow(ctx, d.sql(advisoryHolderOf), key).Scan(h.dest()...)
		if errors.Is(err, pgx.ErrNoRows) {
			return 0, driver.Holder{}, false, nil
		}
		if err != nil {
			return 0, driver.Holder{}, false, d.classify(err)
		}
		if h.owner != nil || time.Now().After(deadline) {
			return *h.pid, h.describe(name), true, nil
		}
		select {
		case <-ctx.Done():
			return 0, driver.Holder{}, false, ctx.Err()
		case <-time.After(watchDelay / 5):
		}
	}
}

// ForceRelease draws a new fence first (so the evicted holder's fenced
// writes fail, and the next grant's fence exceeds the one returned), then
// terminates the backend holding name's advisory key and waits for it to
// exit, and announces the eviction to every WatchEvictions of this
// prefix, all in one statement (advisoryEvict). It needs the right to
// signal that backend: the same role, or membership in pg_signal_backend.
// A non-dlock session holding the same key is terminated too.
func (d *advisory) ForceRelease(ctx context.Context, name string) (driver.Holder, bool, uint64, error) {
	pid, h, held, err := d.holder(ctx, name)
	if err != nil {
		return driver.Holder{}, false, 0, err
	}
	var fence int64
	if !held {
		if err := d.pool.QueryRow(ctx, d.sql(advisoryBump)).Scan(&fence); err != nil {
			return driver.Holder{}, false, 0, d.classify(err)
		}
		return driver.Holder{}, false, uint64(fence), nil
	}
	var (
		gone     bool
		notified int64
	)
	err = d.pool.QueryRow(ctx, d.sql(advisoryEvict), int64(pid), d.evicted, int64(h.Fence), name).Scan(&fence, &gone, &notified)
	if err != nil {
		return driver.Holder{}, false, 0, d.classify(err)
	}
	if !gone {
		return driver.Holder{}, false, 0, fmt.Errorf("pglock: backend %d holding %q did not exit within 10 s", pid, name)
	}
	return h, true, uint64(fence), nil
}
