package dlocktest

import (
	"context"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
)

// testWatchdog checks that the default watchdog keeps a lease alive well
// past its TTL (3.5 TTLs) and that nobody else can take it meanwhile.
func (s *suite) testWatchdog(t *testing.T) {
	name := s.name(t)
	ls := s.acquire(t, s.locker(t), name)
	ctx := ls.Context(context.Background())
	other := s.locker(t)
	deadline := time.Now().Add(s.ttl*7/2 + s.ttl/10)
	for time.Now().Before(deadline) {
		time.Sleep(s.ttl / 2)
		if err := ls.Err(); err != nil {
			t.Fatalf("lease lost while the watchdog was on: %v", err)
		}
		if _, err := other.TryAcquire(s.ctx(t), name, s.opts()...); err == nil {
			t.Fatal("another Locker acquired a lock the watchdog keeps alive")
		}
	}
	if ctx.Err() != nil {
		t.Errorf("lease Context canceled while held: %v", context.Cause(ctx))
	}
	if !ls.Expires().After(time.Now()) {
		t.Errorf("Expires %s is in the past although the watchdog refreshes", ls.Expires())
	}
	release(t, ls)
}

// testManualRefresh checks Lease.Refresh with the watchdog off: refreshed
// at half its TTL, twice, a lease outlives its original TTL.
func (s *suite) testManualRefresh(t *testing.T) {
	s.needExpiry(t)
	name := s.name(t)
	ls := s.acquire(t, s.locker(t), name, dlock.WithAutoRefresh(false))
	first := ls.Expires()
	for range 3 {
		time.Sleep(s.ttl / 3)
		if err := ls.Refresh(s.ctx(t), s.ttl); err != nil {
			t.Fatalf("Refresh: %v", err)
		}
	}
	if !ls.Expires().After(first) {
		t.Errorf("Expires did not move forward after Refresh (%s, was %s)", ls.Expires(), first)
	}
	if err := ls.Err(); err != nil {
		t.Fatalf("refreshed lease ended: %v", err)
	}
	s.expectHeldElsewhere(t, name)
	release(t, ls)
}

// testLossExpired deletes a held lock from outside: the watchdog's next
// refresh must find it gone and end the lease as lost (expired).
func (s *suite) testLossExpired(t *testing.T) {
	if s.h.Expire == nil {
		t.Skip("Harness.Expire is nil")
	}
	reason := dlock.LostExpired
	if s.h.SessionBound {
		reason = ""
	}
	s.checkLoss(t, func(name string) { s.h.Expire(t, name) }, reason)
}

// testLossTakenOver makes a foreign token hold the lock: the watchdog must
// end the lease as lost (taken over).
func (s *suite) testLossTakenOver(t *testing.T) {
	if s.h.Steal == nil {
		t.Skip("Harness.Steal is nil")
	}
	s.checkLoss(t, func(name string) { s.h.Steal(t, name) }, dlock.LostTakenOver)
}

// checkLoss holds a lock, breaks it with breakLock, and checks that Done
// closes in time, Err and Context's cause match ErrLost with the reason,
// and Release then reports the loss.
func (s *suite) checkLoss(t *testing.T, breakLock func(name string), reason string) {
	name := s.name(t)
	ttl := s.stallTTL()
	bound := ttl/3 + s.slack() // one refresh interval, and slack
	ls := s.acquire(t, s.locker(t), name, dlock.WithTTL(ttl))
	ctx := ls.Context(context.Background())
	time.Sleep(ttl / 5)
	breakLock(name)
	took, ok := waitDone(t, ls, bound)
	if !ok {
		t.Fatalf("Done not closed %s after the lock was broken from outside", bound)
	}
	t.Logf("loss noticed after %s", took)
	expectLost(t, ls.Err(), reason, "Err")
	select {
	case <-ctx.Done():
		expectLost(t, context.Cause(ctx), reason, "Context cause")
	case <-time.After(time.Second):
		t.Error("lease Context not canceled on loss")
	}
	expectLost(t, ls.Release(context.Background()), reason, "Release after loss")
}

// testLossServerStopped stops the backend under a held lease: the holder
// must hear of the loss before the lease's TTL could have run out on the
// backend, so that nobody else can be granted the lock while it still
// believes it holds it.
func (s *suite) testLossServerStopped(t *testing.T) {
	if s.h.NewStoppable == nil {
		t.Skip("Harness.NewStoppable is nil")
	}
	l, stop := s.h.NewStoppable(t)
	t.Cleanup(func() { _ = l.Close() })
	ttl := s.stallTTL()
	ls := s.acquire(t, l, s.name(t), dlock.WithTTL(ttl))
	ctx := ls.Context(context.Background())
	time.Sleep(ttl / 2)
	// Note when Done closes even if that happens while stop() still runs
	// (a server's shutdown can take a while).
	doneAt := make(chan time.Time, 1)
	go func() { <-ls.Done(); doneAt <- time.Now() }()
	stopped := time.Now()
	stop()
	_, ok := waitDone(t, ls, ttl+s.slack())
	if !ok {
		closed := time.Now()
		t.Fatalf("Done not closed %s after the server was stopped (TTL %s)", closed.Sub(stopped), ttl)
	}
	closed := <-doneAt
	t.Logf("loss noticed %s after stopping the server (TTL %s)", closed.Sub(stopped), ttl)
	if late := closed.Sub(ls.Expires()); late > 250*time.Millisecond {
		t.Errorf("Done closed %s after the lease's own conservative expiry; the holder must hear of the loss before the backend can hand the lock on", late)
	}
	expectLost(t, ls.Err(), "", "Err after the server stopped")
	select {
	case <-ctx.Done():
		expectLost(t, context.Cause(ctx), "", "Context cause")
	case <-time.After(time.Second):
		t.Error("lease Context not canceled when the server stopped")
	}
}
