package pglock_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/pglock"
)

// TestWatch checks that a release wakes a watcher through LISTEN/NOTIFY in
// lease mode (advisory-mode waiters block in the server instead), that
// other names do not, and that the listener comes back after its
// connection is killed. A release notifies only when an attempt found the
// lock held, so the test makes one.
func TestWatch(t *testing.T) {
	d := newDB(t)
	for _, cfg := range []pglock.Config{{Mode: pglock.Lease}} {
		t.Run(string(cfg.Mode), func(t *testing.T) {
			drv := d.locker(t, cfg).Driver()
			n := drv.(driver.Notifier)
			for round := range 2 {
				ch, stop, err := n.Watch(ctx(t), "watched")
				if err != nil {
					t.Fatal(err)
				}
				grantRelease(t, drv, "unwatched")
				expectWake(t, ch, false, "release of another name")
				grantRelease(t, drv, "watched")
				expectWake(t, ch, true, "release of the watched name")
				stop()
				if round == 0 {
					killListener(t, d)
				}
			}
		})
	}
}

func grantRelease(t *testing.T, drv driver.Driver, name string) {
	t.Helper()
	tok := fmt.Sprintf("tok-%d", time.Now().UnixNano())
	g, err := drv.TryAcquire(ctx(t), driver.Request{Name: name, Token: tok, Owner: "o", TTL: time.Minute})
	if err != nil || !g.Acquired {
		t.Fatalf("TryAcquire(%s) = %+v, %v", name, g, err)
	}
	g, err = drv.TryAcquire(ctx(t), driver.Request{Name: name, Token: tok + "-other", Owner: "o", TTL: time.Minute})
	if err != nil || g.Acquired {
		t.Fatalf("second TryAcquire(%s) = %+v, %v; want held", name, g, err)
	}
	if err := drv.Release(ctx(t), name, tok); err != nil {
		t.Fatalf("Release(%s): %v", name, err)
	}
}

func expectWake(t *testing.T, ch <-chan struct{}, want bool, what string) {
	t.Helper()
	wait := 300 * time.Millisecond
	if want {
		wait = 10 * time.Second
	}
	select {
	case <-ch:
		if !want {
			t.Errorf("woken by the %s", what)
		}
	case <-time.After(wait):
		if want {
			t.Errorf("not woken by the %s", what)
		}
	}
}

// killListener terminates every backend that is LISTENing and waits until
// they are gone.
func killListener(t *testing.T, d *db) {
	t.Helper()
	n := d.exec(t, `SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity
		WHERE datname = current_database() AND query LIKE 'LISTEN %' AND pid <> pg_backend_pid()`)
	if n == 0 {
		t.Fatal("no LISTENing backend to kill")
	}
	time.Sleep(500 * time.Millisecond) // let the listener see its connection die
}
