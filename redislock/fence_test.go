package redislock_test

import (
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/internal/testserver"
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
		t.Errorf("DBSIZE after 50 grants and releases = %d, %v; want 1 (the counter)", n, err)
	}
}
