package dlocktest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/driver"
)

// testAcquireRelease checks one lease's life: its accessors while held,
// exclusion while held, and Done, Err and Context after Release.
func (s *suite) testAcquireRelease(t *testing.T) {
	l := s.locker(t)
	name := s.name(t)
	start := time.Now()
	ls := s.acquire(t, l, name, dlock.WithTTL(s.stallTTL()))
	checkFresh(t, ls, name, start, s.stallTTL())
	ctx := ls.Context(context.Background())
	s.expectHeldElsewhere(t, name)
	if err := ls.Release(context.Background()); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if _, ok := waitDone(t, ls, time.Second); !ok {
		t.Fatal("Done not closed after Release")
	}
	if err := ls.Err(); !errors.Is(err, dlock.ErrReleased) {
		t.Errorf("Err after Release = %v, want ErrReleased", err)
	}
	if cause := context.Cause(ctx); !errors.Is(cause, dlock.ErrReleased) {
		t.Errorf("Context cause after Release = %v, want ErrReleased", cause)
	}
	if err := ls.Release(context.Background()); !errors.Is(err, dlock.ErrReleased) {
		t.Errorf("second Release = %v, want ErrReleased", err)
	}
	if err := ls.Refresh(s.ctx(t), s.ttl); !errors.Is(err, dlock.ErrReleased) {
		t.Errorf("Refresh after Release = %v, want ErrReleased", err)
	}
	again, err := s.locker(t).TryAcquire(s.ctx(t), name, s.opts()...)
	if err != nil {
		t.Fatalf("TryAcquire after Release: %v", err)
	}
	release(t, again)
}

// checkFresh checks the accessors of a lease just granted.
func checkFresh(t *testing.T, ls *dlock.Lease, name string, start time.Time, ttl time.Duration) {
	t.Helper()
	if ls.Name() != name {
		t.Errorf("Name = %q, want %q", ls.Name(), name)
	}
	if len(ls.Token()) < 32 {
		t.Errorf("Token = %q, want at least 128 bits of hex", ls.Token())
	}
	if ls.Fence() == 0 {
		t.Error("Fence = 0, want a positive fencing token")
	}
	if ls.Err() != nil {
		t.Errorf("Err of a fresh lease = %v", ls.Err())
	}
	if ls.TTL() < ttl {
		t.Errorf("TTL = %s, want at least %s", ls.TTL(), ttl)
	}
	// The expiry counts from when the granting attempt was sent, which is
	// after start (by the time a loaded machine takes to send it) and
	// before now, less the clock-drift margin.
	end := time.Now()
	bound := end.Add(ls.TTL() - driver.ClockDrift(ls.TTL()))
	if exp := ls.Expires(); exp.After(bound) || !exp.After(start) {
		t.Errorf("Expires = %s after the request, want after it and at most %s after the grant came back (%s after the request)",
			exp.Sub(start), bound.Sub(end), end.Sub(start))
	}
	select {
	case <-ls.Done():
		t.Error("Done closed on a fresh lease")
	default:
	}
}

// testReleaseCanceledContext checks that Release frees the lock even when
// the caller's context is already canceled.
func (s *suite) testReleaseCanceledContext(t *testing.T) {
	name := s.name(t)
	ctx, cancel := context.WithCancel(context.Background())
	ls, err := s.locker(t).Acquire(ctx, name, s.opts(dlock.WithTTL(max(s.ttl, 30*time.Second)))...)
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	cancel()
	if err := ls.Release(ctx); err != nil {
		t.Fatalf("Release(canceled ctx) = %v, want nil", err)
	}
	again, err := s.locker(t).TryAcquire(s.ctx(t), name, s.opts()...)
	if err != nil {
		t.Fatalf("lock still held after Release with a canceled ctx: %v", err)
	}
	release(t, again)
}

// testCloseReleases checks that Locker.Close releases the leases still
// held, so that others can take them at once rather than after the TTL.
func (s *suite) testCloseReleases(t *testing.T) {
	names := []string{s.name(t, "a"), s.name(t, "b")}
	l := s.h.New(t)
	leases := make([]*dlock.Lease, len(names))
	for i, n := range names {
		leases[i] = s.acquire(t, l, n, dlock.WithTTL(s.longTTL()))
	}
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	other := s.locker(t)
	for i, n := range names {
		if err := leases[i].Err(); !errors.Is(err, dlock.ErrReleased) {
			t.Errorf("lease %q after Close: Err = %v, want ErrReleased", n, err)
		}
		ls, err := other.TryAcquire(s.ctx(t), n, s.opts()...)
		if err != nil {
			t.Fatalf("lock %q still held after its Locker was closed: %v", n, err)
		}
		release(t, ls)
	}
}
