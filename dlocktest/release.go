package dlocktest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
)

// testTokenCheckedRelease checks that a holder whose lease ended cannot
// release (or refresh) the next holder's lock: its Release returns ErrLost
// and the next holder still holds.
func (s *suite) testTokenCheckedRelease(t *testing.T) {
	t.Run("AfterExpiry", s.testReleaseAfterExpiry)
	t.Run("AfterExpire", s.testReleaseAfterExpire)
	t.Run("AfterSteal", s.testReleaseAfterSteal)
}

// testReleaseAfterExpiry lets A's lease run out by TTL (auto-refresh off),
// lets B take the lock, then has A release.
func (s *suite) testReleaseAfterExpiry(t *testing.T) {
	s.needExpiry(t)
	name := s.name(t)
	a := s.acquire(t, s.locker(t), name, dlock.WithAutoRefresh(false))
	if _, ok := waitDone(t, a, s.ttl+s.slack()); !ok {
		t.Fatalf("lease without auto-refresh not ended locally %s after its TTL", s.slack())
	}
	expectLost(t, a.Err(), "", "Err after local expiry")
	b := s.acquire(t, s.locker(t), name, dlock.WithWait(s.ttl+s.slack()))
	s.expectReleaseLost(t, a, b)
}

// testReleaseAfterExpire deletes A's lock from outside while A still
// believes it holds it, lets B take it, then has A release: only the
// backend's token check can stop A from freeing B's lock.
func (s *suite) testReleaseAfterExpire(t *testing.T) {
	if s.h.Expire == nil {
		t.Skip("Harness.Expire is nil")
	}
	name := s.name(t)
	a := s.acquire(t, s.locker(t), name, dlock.WithAutoRefresh(false), dlock.WithTTL(s.longTTL()))
	s.h.Expire(t, name)
	b := s.acquire(t, s.locker(t), name, dlock.WithWait(s.ttl+s.slack()))
	// A backend that pushes the end of a session (driver.SessionWatcher:
	// Expire ended A's connection) has told A already; any other end of
	// A's lease before its TTL is a bug. A's Release still reaches the
	// backend's token check either way.
	var le *dlock.LostError
	if err := a.Err(); err != nil && (!errors.As(err, &le) || le.Reason != dlock.LostSession) {
		t.Fatalf("A's lease ended before its TTL without a refresh or release: %v", a.Err())
	}
	s.expectReleaseLost(t, a, b)
	if err := a.Refresh(s.ctx(t), s.ttl); !errors.Is(err, dlock.ErrLost) {
		t.Errorf("Refresh of the lost lease = %v, want ErrLost", err)
	}
}

// testReleaseAfterSteal has a foreign token overwrite A's lock, then has A
// release: the foreign holder must keep it.
func (s *suite) testReleaseAfterSteal(t *testing.T) {
	if s.h.Steal == nil {
		t.Skip("Harness.Steal is nil")
	}
	name := s.name(t)
	a := s.acquire(t, s.locker(t), name, dlock.WithAutoRefresh(false), dlock.WithTTL(s.longTTL()))
	s.h.Steal(t, name)
	err := a.Release(context.Background())
	expectLost(t, err, "", "Release after Steal")
	s.expectHeldElsewhere(t, name)
}

// expectReleaseLost has the ended lease a release while b holds the lock.
func (s *suite) expectReleaseLost(t *testing.T, a, b *dlock.Lease) {
	t.Helper()
	err := a.Release(context.Background())
	expectLost(t, err, "", "A's Release after B acquired")
	if b.Err() != nil {
		t.Fatalf("B's lease ended when A released: %v", b.Err())
	}
	s.expectHeldElsewhere(t, b.Name())
	if err := b.Release(context.Background()); err != nil {
		t.Errorf("B's Release = %v, want nil: A's Release freed B's lock", err)
	}
}

// longTTL is a TTL that will not run out during a test step.
func (s *suite) longTTL() time.Duration { return max(30*time.Second, 4*s.ttl) }

// stallTTL is the TTL of tests that need a refreshed lease to be lost only
// for the reason they provoke: at least 1.5 s, so that a scheduling stall
// on a loaded machine (longer than a third of a short TTL) does not end it
// first as unconfirmed. The watchdog test itself uses Harness.TTL.
func (s *suite) stallTTL() time.Duration { return max(s.ttl, 1500*time.Millisecond) }

// expectLost checks that err matches ErrLost and carries a *LostError with
// the given reason ("" accepts any).
func expectLost(t testing.TB, err error, reason, what string) {
	t.Helper()
	if !errors.Is(err, dlock.ErrLost) {
		t.Errorf("%s = %v, want ErrLost", what, err)
		return
	}
	var le *dlock.LostError
	if !errors.As(err, &le) {
		t.Errorf("%s = %v, want a *dlock.LostError", what, err)
		return
	}
	if reason != "" && le.Reason != reason {
		t.Errorf("%s: LostError reason %q, want %q", what, le.Reason, reason)
	}
}

// testRefreshNeverRecreates deletes A's lock from outside and has A
// refresh: the refresh must report the loss and must not re-create the
// lock, which stays free for others.
func (s *suite) testRefreshNeverRecreates(t *testing.T) {
	if s.h.Expire == nil {
		t.Skip("Harness.Expire is nil")
	}
	name := s.name(t)
	a := s.acquire(t, s.locker(t), name, dlock.WithAutoRefresh(false), dlock.WithTTL(s.longTTL()))
	s.h.Expire(t, name)
	expectLost(t, a.Refresh(s.ctx(t), s.longTTL()), "", "Refresh after the lock was deleted")
	b, err := s.locker(t).TryAcquire(s.ctx(t), name, s.opts()...)
	if err != nil {
		t.Fatalf("lock not free after a refresh of a deleted lock (re-created?): %v", err)
	}
	release(t, b)
}
