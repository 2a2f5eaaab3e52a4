package pglock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/pglock"
)

// TestRetriedAttempt checks lost-reply recovery in both modes: a second
// attempt with the same token is a grant with the same fence.
func TestRetriedAttempt(t *testing.T) {
	d := newDB(t)
	for _, cfg := range []pglock.Config{{Mode: pglock.Lease}, {Mode: pglock.Advisory}} {
		t.Run(string(cfg.Mode), func(t *testing.T) {
			drv := d.locker(t, cfg).Driver()
			req := driver.Request{Name: "retried", Token: "t1", Owner: "me", TTL: time.Minute}
			g1, err := drv.TryAcquire(ctx(t), req)
			if err != nil || !g1.Acquired {
				t.Fatalf("first attempt = %+v, %v", g1, err)
			}
			g2, err := drv.TryAcquire(ctx(t), req)
			if err != nil || !g2.Acquired || g2.Fence != g1.Fence {
				t.Fatalf("retried attempt = %+v, %v; want granted with fence %d", g2, err, g1.Fence)
			}
			if cfg.Mode == pglock.Advisory {
				// A holder publishes its owner and fence once it has
				// held the lock a little while (pglock's watchDelay).
				time.Sleep(200 * time.Millisecond)
			}
			other := req
			other.Token, other.Owner = "t2", "other"
			g3, err := drv.TryAcquire(ctx(t), other)
			if err != nil || g3.Acquired || g3.Holder.Owner != "me" || g3.Holder.Fence != g1.Fence {
				t.Fatalf("other token's attempt = %+v, %v; want held by me, fence %d", g3, err, g1.Fence)
			}
			if err := drv.Release(ctx(t), req.Name, req.Token); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestRefreshBatch refreshes a live, an expired and a stolen lease in one
// call.
func TestRefreshBatch(t *testing.T) {
	d := newDB(t)
	drv := d.locker(t, pglock.Config{}).Driver()
	for _, n := range []string{"live", "expired", "stolen"} {
		g, err := drv.TryAcquire(ctx(t), driver.Request{Name: n, Token: "tok-" + n, TTL: time.Minute})
		if err != nil || !g.Acquired {
			t.Fatalf("acquire %s: %+v, %v", n, g, err)
		}
	}
	d.exec(t, `UPDATE dlock_leases SET expires_at = clock_timestamp() - interval '1 second' WHERE name = 'expired'`)
	d.exec(t, `UPDATE dlock_leases SET token = 'thief' WHERE name = 'stolen'`)
	items := []driver.RefreshItem{
		{Name: "stolen", Token: "tok-stolen", TTL: time.Minute},
		{Name: "live", Token: "tok-live", TTL: 2 * time.Minute},
		{Name: "expired", Token: "tok-expired", TTL: time.Minute},
		{Name: "never", Token: "tok-never", TTL: time.Minute},
	}
	res, err := drv.(driver.BatchRefresher).RefreshBatch(ctx(t), items)
	if err != nil {
		t.Fatal(err)
	}
	want := []error{driver.ErrTakenOver, nil, driver.ErrExpired, driver.ErrExpired}
	for i := range items {
		if !errors.Is(res[i], want[i]) || (want[i] == nil && res[i] != nil) {
			t.Errorf("%s: %v, want %v", items[i].Name, res[i], want[i])
		}
	}
	var left time.Duration
	if err := d.admin.QueryRow(ctx(t), `SELECT expires_at - clock_timestamp() FROM dlock_leases WHERE name = 'live'`).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left < time.Minute || left > 2*time.Minute {
		t.Errorf("live lease has %s left after a 2m refresh", left)
	}
}

// TestFenceSurvivesRelease checks that fences keep rising across releases
// and force-releases of a free lock.
func TestFenceSurvivesRelease(t *testing.T) {
	d := newDB(t)
	l := d.locker(t, pglock.Config{})
	var last uint64
	for range 3 {
		ls, err := l.Acquire(ctx(t), "fenced")
		if err != nil {
			t.Fatal(err)
		}
		if ls.Fence() <= last {
			t.Errorf("fence %d after %d", ls.Fence(), last)
		}
		last = ls.Fence()
		if err := ls.Release(ctx(t)); err != nil {
			t.Fatal(err)
		}
	}
	_, held, fence, err := l.ForceRelease(ctx(t), "fenced")
	if err != nil || held || fence <= last {
		t.Errorf("ForceRelease(free) = held %v, fence %d, %v; want free, > %d", held, fence, err, last)
	}
	if _, _, fence2, err := l.ForceRelease(ctx(t), "never-held"); err != nil || fence2 <= fence {
		t.Errorf("ForceRelease(never held) = fence %d, %v; want > %d", fence2, err, fence)
	}
}

// TestMigrate checks that Migrate is idempotent, also when run
// concurrently, and honours a custom table in both modes.
func TestMigrate(t *testing.T) {
	url := newDB(t).url
	for _, cfg := range []pglock.Config{{}, {Mode: pglock.Advisory}, {Table: "custom_leases"}, {Mode: pglock.Advisory, Table: "public.custom_fences"}} {
		errs := make(chan error, 4)
		for range 4 {
			go func() {
				l, err := cfg.Locker(newPool(t, url))
				if err == nil {
					err = l.Migrate(ctx(t))
					_ = l.Close()
				}
				errs <- err
			}()
		}
		for range 4 {
			if err := <-errs; err != nil {
				t.Errorf("concurrent Migrate(%+v): %v", cfg, err)
			}
		}
	}
	l, err := dlock.Open(ctx(t), url+"&table=custom_leases")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ls, err := l.Acquire(ctx(t), "in-custom-table")
	if err != nil {
		t.Fatal(err)
	}
	defer ls.Release(ctx(t))
	var n int
	if err := newPool(t, url).QueryRow(ctx(t), `SELECT count(*) FROM custom_leases WHERE name = 'in-custom-table'`).Scan(&n); err != nil || n != 1 {
		t.Errorf("custom table has %d rows for the lock, %v", n, err)
	}
}

// TestWithoutMigrate checks that a missing table is a clear backend error.
func TestWithoutMigrate(t *testing.T) {
	url := newDB(t).url
	l, err := pglock.Config{Table: "not_migrated"}.Locker(newPool(t, url))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, err = l.TryAcquire(ctx(t), "x")
	if !errors.Is(err, dlock.ErrBackend) {
		t.Errorf("TryAcquire without Migrate = %v, want ErrBackend", err)
	}
	t.Logf("without Migrate: %v", err)
}
