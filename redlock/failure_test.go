package redlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
)

// failTTL is long enough for a loaded machine, short enough for the tests
// that wait for a loss.
const failTTL = 3 * time.Second

// TestMinorityDown: with 1 and then 2 of 5 nodes killed, acquire and
// refresh still work.
func TestMinorityDown(t *testing.T) {
	ns := startNodes(t, 5)
	l := ns.locker(t, Config{NodeTimeout: suiteNodeTimeout})
	ctx := t.Context()
	for killed := 1; killed <= 2; killed++ {
		ns.srv[killed-1].Kill()
		name := fmt.Sprintf("minority/%d", killed)
		ls, err := l.Acquire(ctx, name, dlock.WithTTL(failTTL), dlock.WithAutoRefresh(false))
		if err != nil {
			t.Fatalf("%d nodes down: Acquire: %v", killed, err)
		}
		if err := ls.Refresh(ctx, failTTL); err != nil {
			t.Fatalf("%d nodes down: Refresh: %v", killed, err)
		}
		if _, err := l.TryAcquire(ctx, name, dlock.WithTTL(failTTL)); !errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatalf("%d nodes down: a second TryAcquire = %v, want ErrNotAcquired", killed, err)
		}
		if err := ls.Release(ctx); err != nil {
			t.Fatalf("%d nodes down: Release: %v", killed, err)
		}
	}
}

// TestMajorityDown: with 3 of 5 nodes killed nothing is acquired, and a
// lease held before the kill is lost (Done closes) before it could have
// expired on the surviving nodes.
func TestMajorityDown(t *testing.T) {
	ns := startNodes(t, 5)
	l := ns.locker(t, Config{NodeTimeout: suiteNodeTimeout})
	ctx := t.Context()
	held, err := l.Acquire(ctx, "majority/held", dlock.WithTTL(failTTL))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range ns.srv[:3] {
		s.Kill()
	}
	killed := time.Now()
	_, err = l.TryAcquire(ctx, "majority/new", dlock.WithTTL(failTTL))
	if err == nil || !errors.Is(err, dlock.ErrBackend) {
		t.Fatalf("TryAcquire with 3 of 5 nodes down = %v, want a backend error", err)
	}
	select {
	case <-held.Done():
		t.Logf("holder's Done closed %s after the kill (TTL %s)", time.Since(killed), failTTL)
	case <-time.After(failTTL + 5*time.Second):
		t.Fatal("holder's Done did not close after a majority of nodes died")
	}
	if !errors.Is(held.Err(), dlock.ErrLost) {
		t.Errorf("holder's Err = %v, want ErrLost", held.Err())
	}
	if late := time.Since(held.Expires()); late > 250*time.Millisecond {
		t.Errorf("Done closed %s after the lease's own expiry", late)
	}
}

// TestPausedNodeAddsNoLatency: a SIGSTOPped node (alive, silent) costs an
// acquire at most the node timeout, never its pause.
func TestPausedNodeAddsNoLatency(t *testing.T) {
	ns := startNodes(t, 5)
	l := ns.locker(t, Config{}) // the default 50 ms node timeout
	ctx := t.Context()
	// Warm up: connections and cached scripts on every node (the first
	// request to a node dials it, which a loaded machine may not finish
	// within 50 ms).
	warm, err := l.Acquire(ctx, "paused/warm-up", dlock.WithTTL(failTTL), dlock.WithWait(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	_ = warm.Release(ctx)
	const pause = 2 * time.Second
	ns.srv[2].Pause()
	t.Cleanup(ns.srv[2].Resume)
	time.AfterFunc(pause, ns.srv[2].Resume)
	start := time.Now()
	ls, err := l.TryAcquire(ctx, "paused/lock", dlock.WithTTL(10*time.Second))
	took := time.Since(start)
	if err != nil {
		t.Fatalf("TryAcquire with one node paused: %v", err)
	}
	t.Logf("acquired in %s with one of 5 nodes paused for %s", took, pause)
	if took > pause/2 {
		t.Errorf("acquire took %s: the paused node added its delay (pause %s)", took, pause)
	}
	start = time.Now()
	if err := ls.Release(ctx); err != nil {
		t.Fatalf("Release with one node paused: %v", err)
	}
	if took := time.Since(start); took > pause/2 {
		t.Errorf("release took %s: the paused node added its delay", took)
	}
}

// TestRacingClients: many clients racing for one name never hold it at
// the same time.
func TestRacingClients(t *testing.T) {
	ns := startNodes(t, 5)
	const clients, rounds = 4, 25
	var inside, overlaps, grants atomic.Int64
	var wg sync.WaitGroup
	for range clients {
		l := ns.locker(t, Config{NodeTimeout: suiteNodeTimeout})
		wg.Go(func() {
			for range rounds {
				ls, err := l.Acquire(t.Context(), "race", dlock.WithTTL(failTTL), dlock.WithWait(30*time.Second))
				if err != nil {
					t.Errorf("Acquire: %v", err)
					return
				}
				grants.Add(1)
				if inside.Add(1) != 1 {
					overlaps.Add(1)
				}
				time.Sleep(time.Millisecond)
				inside.Add(-1)
				_ = ls.Release(context.Background())
			}
		})
	}
	wg.Wait()
	if overlaps.Load() > 0 {
		t.Errorf("two clients held the lock at once %d times", overlaps.Load())
	}
	if grants.Load() == 0 {
		t.Error("no client ever acquired the lock")
	}
	t.Logf("%d grants in %d attempts", grants.Load(), clients*rounds)
}

// TestSettledOnReturn: when TryAcquire returns, every node the attempt
// reached has answered and let go, and a released lease is gone from
// every node. Three of five nodes hold the lock for a foreign token, so
// the attempt is refused once they answer, while the two free nodes may
// grant it a moment later; and a release returns once a majority has
// answered. A key left behind (this client's own, or the released
// holder's) would refuse this client's next, gated attempt at that node
// while a majority is free.
func TestSettledOnReturn(t *testing.T) {
	ns := startNodes(t, 5)
	l := ns.locker(t, Config{NodeTimeout: suiteNodeTimeout})
	for i := range 50 {
		name := fmt.Sprintf("settled/%d", i)
		ns.steal(t, name)
		if _, err := l.TryAcquire(t.Context(), name, dlock.WithTTL(failTTL)); !errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatalf("TryAcquire of a lock held on 3 of 5 nodes = %v, want ErrNotAcquired", err)
		}
		if on := ns.holding(t, name); len(on) != 3 {
			t.Fatalf("round %d: after the refused attempt returned, the lock is held on nodes %v, want only the 3 stolen", i, on)
		}
		ns.expire(t, name)
		ls, err := l.TryAcquire(t.Context(), name, dlock.WithTTL(failTTL))
		if err != nil {
			t.Fatalf("TryAcquire of a free lock: %v", err)
		}
		if err := ls.Release(t.Context()); err != nil {
			t.Fatalf("Release: %v", err)
		}
		if on := ns.holding(t, name); len(on) != 0 {
			t.Fatalf("round %d: after Release returned, the lock is held on nodes %v", i, on)
		}
	}
}
