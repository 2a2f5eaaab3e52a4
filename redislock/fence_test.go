package redislock_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/internal/testing/testserver"
)

// grantFence takes and releases name, returning the grant's fence.
func grantFence(t *testing.T, l *dlock.Locker, name string) uint64 {
	t.Helper()
	ctx := ctxT(t)
	ls, err := l.Acquire(ctx, name, dlock.WithTTL(time.Minute), dlock.WithWait(10*time.Second))
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if err := ls.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	return ls.Fence()
}

// TestFenceSurvivesDataLoss: FLUSHALL, a restart without persistence, and
// a counter rolled back to an old value never make a fence go backwards.
func TestFenceSurvivesDataLoss(t *testing.T) {
	srv := testserver.Redis(t)
	c := client(t, srv.Addr)
	l := locker(t, c)
	defer l.Close()
	const name = "fence/loss"
	last := grantFence(t, l, name)
	step := func(what string, lose func()) {
		lose()
		f := grantFence(t, l, name)
		if f <= last {
			t.Errorf("after %s: fence %d, want > %d", what, f, last)
		}
		last = f
	}
	step("a plain release", func() {})
	step("FLUSHALL", func() {
		if err := c.FlushAll(ctxT(t)).Err(); err != nil {
			t.Fatal(err)
		}
	})
	step("a restart without persistence", srv.Restart)
	step("a counter rolled back to 1", func() {
		if err := c.Set(ctxT(t), keys.Counter(name, false), 1, 0).Err(); err != nil {
			t.Fatal(err)
		}
	})
	if ttl, err := c.TTL(ctxT(t), keys.Counter(name, false)).Result(); err != nil || ttl != -1 {
		t.Errorf("fence counter TTL = %v, %v; want none (-1ns): it must never expire", ttl, err)
	}
}

// TestFenceCompact: many grants on one name keep one counter key.
func TestFenceCompact(t *testing.T) {
	srv := testserver.Redis(t)
	c := client(t, srv.Addr)
	l := locker(t, c)
	defer l.Close()
	for range 50 {
		grantFence(t, l, "fence/compact")
	}
	n, err := c.DBSize(ctxT(t)).Result()
	if err != nil || n != 1 {
		t.Errorf("DBSIZE after 50 grants and releases = %d, %v; want 1 (the server's counter)", n, err)
	}
}

// TestFenceMigratesLegacyCounters starts from the layout of older versions
// (one fence counter per name, written by hand, some far above the clock)
// and checks that fences keep rising and the old keys go.
func TestFenceMigratesLegacyCounters(t *testing.T) {
	srv := testserver.Redis(t)
	c := client(t, srv.Addr)
	ctx := ctxT(t)
	now := uint64(time.Now().UnixMicro())
	legacy := map[string]uint64{
		"legacy/behind": 42,            // an old counter below the clock
		"legacy/ahead":  now + 1e12,    // one far above it (a clock once set ahead)
		"legacy/near":   now + 5000000, // 5 s ahead
	}
	for name, v := range legacy {
		if err := c.Set(ctx, keys.LegacyFence(name), v, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	l := locker(t, c)
	defer l.Close()
	for name, old := range legacy {
		last := old
		for i := range 3 {
			f := grantFence(t, l, name)
			if f <= last {
				t.Errorf("%s grant %d: fence %d, want > %d", name, i, f, last)
			}
			last = f
		}
		if n := c.Exists(ctx, keys.LegacyFence(name)).Val(); n != 0 {
			t.Errorf("%s: the legacy counter is still there", name)
		}
	}
	// A name never seen before shares the counter, which now stands above
	// every migrated value.
	if f := grantFence(t, l, "legacy/new"); f <= legacy["legacy/ahead"] {
		t.Errorf("a new name got fence %d, not above the migrated %d", f, legacy["legacy/ahead"])
	}
}

// TestFenceStateBounded: 10,000 names acquired and released leave one
// key (the server's fence counter), not one per name.
func TestFenceStateBounded(t *testing.T) {
	srv := testserver.Redis(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 32})
	t.Cleanup(func() { _ = c.Close() })
	l := locker(t, c)
	defer l.Close()
	ctx := ctxT(t)
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for i := w; i < 10000; i += 16 {
				ls, err := l.TryAcquire(ctx, fmt.Sprintf("bounded/%d", i), dlock.WithAutoRefresh(false))
				if err != nil {
					t.Error(err)
					return
				}
				if err := ls.Release(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	keysLeft, err := c.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keysLeft) != 1 || keysLeft[0] != keys.Counter("x", false) {
		t.Errorf("10,000 names left %d keys (%.5q...), want only the fence counter", len(keysLeft), keysLeft)
	}
}
