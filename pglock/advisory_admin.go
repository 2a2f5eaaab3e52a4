package pglock

import (
	"context"
	"errors"
	"fmt"

	"github.com/dlockdev/dlock/driver"
	"github.com/jackc/pgx/v5"
)

// heldKeys returns the advisory keys held in this database, by key, with
// the holding backend's pid.
func (d *advisory) heldKeys(ctx context.Context) (map[int64]uint32, error) {
	rows, err := d.pool.Query(ctx, advisoryHeld)
	if err != nil {
		return nil, err
	}
	held := map[int64]uint32{}
	var hi, lo int64
	var pid uint32
	_, err = pgx.ForEachRow(rows, []any{&hi, &lo, &pid}, func() error {
		held[int64(uint64(hi)<<32|uint64(lo))] = pid
		return nil
	})
	return held, err
}

// List returns the held locks whose names start with prefix: the names
// in the fence table whose advisory key is held now. A name whose key
// collides with a held one is listed too (see Key).
func (d *advisory) List(ctx context.Context, prefix string) ([]driver.Holder, error) {
	held, err := d.heldKeys(ctx)
	if err != nil || len(held) == 0 {
		return nil, err
	}
	rows, err := d.pool.Query(ctx, d.sql(advisoryFences), prefix)
	if err != nil {
		return nil, err
	}
	var hs []driver.Holder
	var h driver.Holder
	var fence int64
	_, err = pgx.ForEachRow(rows, []any{&h.Name, &h.Owner, &fence}, func() error {
		if _, ok := held[Key(h.Name)]; ok {
			hs = append(hs, driver.Holder{Name: h.Name, Owner: h.Owner, Fence: uint64(fence), TTL: -1})
		}
		return nil
	})
	return hs, err
}

// Inspect returns name's holder when its advisory key is held.
func (d *advisory) Inspect(ctx context.Context, name string) (driver.Holder, bool, error) {
	if _, ok, err := d.holderPID(ctx, name); err != nil || !ok {
		return driver.Holder{}, false, err
	}
	h := driver.Holder{Name: name, TTL: -1}
	var fence int64
	err := d.pool.QueryRow(ctx, d.sql(advisoryFence), name).Scan(&h.Name, &h.Owner, &fence)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return driver.Holder{}, false, err
	}
	h.Fence = uint64(fence)
	return h, true, nil
}

func (d *advisory) holderPID(ctx context.Context, name string) (uint32, bool, error) {
	hi, lo := keyHalves(Key(name))
	var k1, k2 int64
	var pid uint32
	err := d.pool.QueryRow(ctx, advisoryHolderOf, hi, lo).Scan(&k1, &k2, &pid)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	return pid, err == nil, err
}

// ForceRelease bumps name's fence first (so the evicted holder's fenced
// writes fail, and the next grant's fence exceeds the one returned), then
// terminates the backend holding its advisory key and waits for it to
// exit. It needs the right to signal that backend: the same role, or
// membership in pg_signal_backend. A non-dlock session holding the same
// key is terminated too.
func (d *advisory) ForceRelease(ctx context.Context, name string) (driver.Holder, bool, uint64, error) {
	var (
		owner           string
		fence, newFence int64
	)
	if _, err := d.pool.Exec(ctx, d.sql(advisoryEnsureRow), name); err != nil {
		return driver.Holder{}, false, 0, err
	}
	if err := d.pool.QueryRow(ctx, d.sql(advisoryBump), name).Scan(&owner, &fence, &newFence); err != nil {
		return driver.Holder{}, false, 0, err
	}
	pid, held, err := d.holderPID(ctx, name)
	if err != nil || !held {
		return driver.Holder{}, false, uint64(newFence), err
	}
	var ok bool
	if err := d.pool.QueryRow(ctx, advisoryTerminate, int64(pid)).Scan(&ok); err != nil {
		return driver.Holder{}, false, 0, err
	}
	if !ok {
		return driver.Holder{}, false, 0, fmt.Errorf("pglock: backend %d holding %q did not exit within 10 s", pid, name)
	}
	return driver.Holder{Name: name, Owner: owner, Fence: uint64(fence), TTL: -1}, true, uint64(newFence), nil
}
