package pglock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/pglock"
)

// TestEvictionPushed checks, in both modes, that another client's
// ForceRelease ends the holder's lease at once as force-released, long
// before its next refresh (a third of a one-minute TTL): the NOTIFY on the
// eviction channel reaches the holder's Locker. Without it, a lease-mode
// holder would learn at that refresh, and an advisory holder would see
// its session end ("backend session ended").
func TestEvictionPushed(t *testing.T) {
	d := newDB(t)
	for _, cfg := range modes {
		t.Run(string(cfg.Mode), func(t *testing.T) {
			holder := d.locker(t, cfg)
			ls, err := holder.Acquire(ctx(t), "evict-me", dlock.WithTTL(time.Minute), dlock.WithOwner("victim"))
			if err != nil {
				t.Fatal(err)
			}
			d.awaitListener(t, cfg)
			evicted, ok, _, err := d.locker(t, cfg).ForceRelease(ctx(t), "evict-me")
			if err != nil || !ok || evicted.Owner != "victim" || evicted.Fence != ls.Fence() {
				t.Fatalf("ForceRelease = %+v, %v, %v; want the victim with fence %d", evicted, ok, err, ls.Fence())
			}
			select {
			case <-ls.Done():
			case <-time.After(15 * time.Second):
				t.Fatal("the evicted holder was not told before its next refresh")
			}
			var le *dlock.LostError
			if !errors.As(ls.Err(), &le) || le.Reason != dlock.LostForceReleased || le.Fence != ls.Fence() {
				t.Errorf("holder's Err = %v, want a LostError saying %q", ls.Err(), dlock.LostForceReleased)
			}
			if err := ls.Release(ctx(t)); !errors.Is(err, dlock.ErrLost) {
				t.Errorf("evicted holder's Release = %v, want ErrLost", err)
			}
		})
	}
}

// TestWatchEvictions checks the driver's EvictionWatcher directly: it
// hears the evictions of its own table by other clients as (name, fence)
// of the evicted grant, names with spaces included, and nothing for a
// free lock or for another table's locks.
func TestWatchEvictions(t *testing.T) {
	d := newDB(t)
	for _, cfg := range modes {
		t.Run(string(cfg.Mode), func(t *testing.T) {
			other := pglock.Config{Mode: cfg.Mode, Table: "other_" + string(cfg.Mode)}
			migrate(t, d.admin, other)
			drv, err := cfg.Driver(d.pool)
			if err != nil {
				t.Fatal(err)
			}
			defer drv.Close()
			ch, stop, err := drv.(driver.EvictionWatcher).WatchEvictions(ctx(t))
			if err != nil {
				t.Fatal(err)
			}
			defer stop()

			// Another table's eviction, then a free lock's: neither is heard.
			otherHolder := d.locker(t, other)
			ols, err := otherHolder.Acquire(ctx(t), "a lock with spaces")
			if err != nil {
				t.Fatal(err)
			}
			if _, ok, _, err := d.locker(t, other).ForceRelease(ctx(t), "a lock with spaces"); err != nil || !ok {
				t.Fatalf("ForceRelease on the other table = %v, %v", ok, err)
			}
			select {
			case <-ols.Done():
			case <-time.After(15 * time.Second):
				t.Fatal("the other table's holder was not evicted")
			}
			if _, ok, _, err := d.locker(t, cfg).ForceRelease(ctx(t), "free"); err != nil || ok {
				t.Fatalf("ForceRelease(free) = %v, %v", ok, err)
			}
			// This table's eviction is heard, and is the first thing heard.
			ls, err := d.locker(t, cfg).Acquire(ctx(t), "a lock with spaces")
			if err != nil {
				t.Fatal(err)
			}
			if _, ok, _, err := d.locker(t, cfg).ForceRelease(ctx(t), "a lock with spaces"); err != nil || !ok {
				t.Fatalf("ForceRelease = %v, %v", ok, err)
			}
			want := driver.Eviction{Name: "a lock with spaces", Fence: ls.Fence()}
			select {
			case e, ok := <-ch:
				if !ok || e != want {
					t.Errorf("first eviction heard = %+v (open %v), want %+v", e, ok, want)
				}
			case <-time.After(15 * time.Second):
				t.Fatalf("eviction %+v not heard", want)
			}
		})
	}
}

// awaitListener waits until a backend LISTENs on cfg's eviction channel
// (the holder's Locker subscribes in the background when its first lease
// starts), and then a little more, for the subscription to be recorded
// after its LISTEN returned.
func (d *db) awaitListener(t *testing.T, cfg pglock.Config) {
	t.Helper()
	table := cfg.Table
	if table == "" {
		table = pglock.DefaultLeaseTable
		if cfg.Mode == pglock.Advisory {
			table = pglock.DefaultFenceTable
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		err := d.admin.QueryRow(ctx(t), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND query = $1`, `LISTEN "`+table+`_evicted"`).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			time.Sleep(50 * time.Millisecond)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no backend LISTENs on %s_evicted", table)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
