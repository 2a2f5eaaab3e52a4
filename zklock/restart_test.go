package zklock_test

import (
	"context"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/internal/testing/testserver"
)

// TestFencesSurviveRestart: a grant's fence is its node's czxid, and
// ZooKeeper's zxid never goes back: not across a graceful restart, not
// across a crash (SIGKILL), where the server rebuilds its state from the
// snapshot and transaction log in its data directory.
func TestFencesSurviveRestart(t *testing.T) {
	srv := testserver.ZooKeeper(t)
	ctx := context.Background()
	name := "restart/" + t.Name()
	var last uint64
	take := func(step string) {
		t.Helper()
		l := locker(t, srv.Addr)
		ls, err := l.Acquire(ctx, name, dlock.WithTTL(2*time.Second), dlock.WithWait(30*time.Second))
		if err != nil {
			t.Fatalf("%s: Acquire: %v", step, err)
		}
		t.Logf("%s: fence %#x", step, ls.Fence())
		if ls.Fence() <= last {
			t.Errorf("%s: fence %#x is not above the last one, %#x", step, ls.Fence(), last)
		}
		last = ls.Fence()
		if err := ls.Release(ctx); err != nil {
			t.Fatalf("%s: Release: %v", step, err)
		}
		_ = l.Close()
	}
	take("first grant")
	take("second grant")
	srv.Stop()
	srv.Start()
	take("after a graceful restart")
	srv.Kill()
	srv.Start()
	take("after a crash")
	// ForceRelease's new fence comes from the same counter. The holder's
	// session must outlive the crash and restart (a long timeout), and
	// its node must stay: no watchdog, which would declare the lease lost
	// during the outage and then release it.
	l, _ := lockerOn(t, 30*time.Second, srv.Addr)
	ls, err := l.Acquire(ctx, name, dlock.WithTTL(30*time.Second), dlock.WithAutoRefresh(false))
	if err != nil {
		t.Fatal(err)
	}
	last = ls.Fence()
	srv.Kill()
	srv.Start()
	_, held, fence, err := locker(t, srv.Addr).ForceRelease(ctx, name)
	if err != nil || !held || fence <= last {
		t.Fatalf("ForceRelease after a crash: held %v, fence %#x, err %v; want held, fence above %#x", held, fence, err, last)
	}
	last = fence
	take("after a crash and a force-release")
}
