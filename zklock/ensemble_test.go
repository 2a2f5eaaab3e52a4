package zklock_test

import (
	"context"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/internal/testing/testserver"
)

// TestEnsembleLeaderKilled: in a 3-server ensemble, SIGKILLing the leader
// while a lock is held either leaves the holder its lock (the session
// survives the election) or tells it (Done closes) — never a silent double
// grant: whenever a contender on the surviving servers is granted the
// lock, the first holder's lease must already have ended.
func TestEnsembleLeaderKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three JVMs; skipped in -short")
	}
	e := testserver.ZooKeeperEnsemble(t, 3)
	ctx := context.Background()
	const ttl = sessionTimeout
	name := "ensemble/" + t.Name()
	holder := locker(t, e.Addrs...)
	ls, err := holder.Acquire(ctx, name, dlock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	if fs, err := holder.Driver().(driver.Diagnoser).Diagnose(ctx); err != nil || fs[0].Verdict != driver.VerdictOK {
		t.Errorf("Diagnose on a 3-server ensemble: %+v, %v; want the ensemble check ok", fs, err)
	}
	leader := e.Leader(t, 10*time.Second)
	var survivors []string
	for _, s := range e.Servers {
		if s != leader {
			survivors = append(survivors, s.Addr)
		}
	}
	t.Logf("holder has fence %d; killing the leader, server %d (%s)", ls.Fence(), leader.ID, leader.Addr)
	leader.Kill()
	killed := time.Now()

	other := locker(t, survivors...)
	grants := 0
	for time.Since(killed) < 4*ttl {
		tctx, cancel := context.WithTimeout(ctx, ttl)
		l2, err := other.TryAcquire(tctx, name, dlock.WithTTL(ttl))
		cancel()
		if err == nil {
			grants++
			if ls.Err() == nil {
				t.Fatalf("silent double grant: a contender got fence %d %s after the leader died while the holder (fence %d) still believes it holds the lock",
					l2.Fence(), time.Since(killed), ls.Fence())
			}
			if l2.Fence() <= ls.Fence() {
				t.Errorf("fence %d after the failover is not above the holder's %d", l2.Fence(), ls.Fence())
			}
			_ = l2.Release(ctx)
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := ls.Err(); err != nil {
		t.Logf("outcome: the holder was told it lost the lock (%v); a contender got it: %v", err, grants > 0)
	} else {
		t.Logf("outcome: the session survived the election; the holder kept its lock for %s", time.Since(killed).Round(time.Millisecond))
		if err := ls.Release(ctx); err != nil {
			t.Errorf("Release after the election: %v", err)
		}
	}
	// Afterwards the ensemble of two grants the lock again, with a
	// greater fence.
	l3, err := other.Acquire(ctx, name, dlock.WithTTL(ttl), dlock.WithWait(30*time.Second))
	if err != nil {
		t.Fatalf("Acquire on the surviving servers: %v", err)
	}
	if l3.Fence() <= ls.Fence() {
		t.Errorf("fence %d after the failover is not above %d", l3.Fence(), ls.Fence())
	}
	_ = l3.Release(ctx)
}
