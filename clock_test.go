package dlock_test

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/internal/testing/clocktest"
	"github.com/dlockdev/dlock/memlock"
)

// TestClockStalled: the watchdog runs on the Locker's Clock. A clock that
// stalls (a paused VM's clock source) stops refreshes, and the backend,
// on its own clock, expires the lease under a holder that still believes:
// the case only fencing protects against.
func TestClockStalled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memlock.NewStore()
		d := newCounting(t, store)
		clock := clocktest.New()
		l := wrap(t, d, dlock.WithClock(clock))
		defer l.Close()
		other := wrap(t, newCounting(t, store).inner)
		defer other.Close()
		const ttl = 3 * time.Second
		ls, err := l.Acquire(t.Context(), "stall", dlock.WithTTL(ttl))
		if err != nil {
			t.Fatal(err)
		}
		clock.SetRate(0)
		time.Sleep(ttl + time.Millisecond)
		synctest.Wait()
		if n := len(d.refreshTimes()); n != 0 {
			t.Errorf("%d refreshes while the clock stood still, want 0", n)
		}
		if ls.Err() != nil {
			t.Fatalf("holder told (%v): its clock stood still, it cannot know", ls.Err())
		}
		next, err := other.TryAcquire(t.Context(), "stall")
		if err != nil {
			t.Fatalf("the backend did not expire the stalled holder's lease: %v", err)
		}
		if next.Fence() <= ls.Fence() {
			t.Errorf("second grant's fence %d not above the stalled holder's %d", next.Fence(), ls.Fence())
		}
		_ = next.Release(t.Context())
		clock.SetRate(1)
		<-ls.Done() // the refresh, now sent, is refused
	})
}

// TestClockStepForward: a clock that steps past the lease's loss time
// makes the watchdog declare it lost at once, and release it on the
// backend, so another holder can take it without waiting for the TTL.
func TestClockStepForward(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memlock.NewStore()
		clock := clocktest.New()
		l := wrap(t, newCounting(t, store), dlock.WithClock(clock))
		defer l.Close()
		other := wrap(t, newCounting(t, store).inner)
		defer other.Close()
		const ttl = 30 * time.Second
		ls, err := l.Acquire(t.Context(), "step", dlock.WithTTL(ttl))
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		clock.Step(ttl)
		<-ls.Done()
		if took := time.Since(start); took != 0 {
			t.Errorf("told %s after the step, want at once", took)
		}
		var le *dlock.LostError
		if !errors.As(ls.Err(), &le) || le.Reason != dlock.LostUnconfirmed {
			t.Errorf("Err = %v, want a LostError (%s)", ls.Err(), dlock.LostUnconfirmed)
		}
		synctest.Wait() // the lost lease's background release
		next, err := other.TryAcquire(t.Context(), "step")
		if err != nil {
			t.Fatalf("lock not free after the holder gave it up: %v", err)
		}
		_ = next.Release(t.Context())
	})
}

// TestWithClockInvalid: WithClock(nil) and WithClock on one acquire are
// invalid arguments.
func TestWithClockInvalid(t *testing.T) {
	if _, err := dlock.NewLocker(newCounting(t, memlock.NewStore()), dlock.WithClock(nil)); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Errorf("WithClock(nil) = %v, want ErrInvalidArgument", err)
	}
	l := wrap(t, newCounting(t, memlock.NewStore()))
	defer l.Close()
	if _, err := l.TryAcquire(t.Context(), "x", dlock.WithClock(clocktest.New())); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Errorf("WithClock on TryAcquire = %v, want ErrInvalidArgument", err)
	}
}
