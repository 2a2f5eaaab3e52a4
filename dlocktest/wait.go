package dlocktest

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
)

// wakeBackoff is the slow polling backoff of the wake-up test's waiter: a
// notified waiter must beat it by far.
const wakeBackoff = 5 * time.Second

// holderOwner is the owner string the suite's holders announce.
const holderOwner = "dlocktest-holder"

// testBoundedWait checks that a wait bound runs out with ErrNotAcquired and
// a *HeldError describing the holder, and that TryAcquire does not wait.
func (s *suite) testBoundedWait(t *testing.T) {
	name := s.name(t)
	// A long TTL: a scheduling stall on a loaded machine must not cost
	// the holder its lease while B waits (the watchdog has its own test).
	a := s.acquire(t, s.locker(t), name, dlock.WithOwner(holderOwner), dlock.WithTTL(s.longTTL()))
	defer release(t, a)
	b := s.locker(t)
	wait := s.ttl
	start := time.Now()
	_, err := b.Acquire(s.ctx(t), name, s.opts(dlock.WithWait(wait))...)
	elapsed := time.Since(start)
	checkHeld(t, err, a, "Acquire with a bounded wait")
	if elapsed < wait*9/10 {
		t.Errorf("Acquire gave up after %s, before its wait bound %s", elapsed, wait)
	}
	if elapsed > wait+s.slack() {
		t.Errorf("Acquire returned %s after its wait bound %s", elapsed-wait, wait)
	}
	_, err = b.TryAcquire(s.ctx(t), name, s.opts()...)
	checkHeld(t, err, a, "TryAcquire")
	_, err = b.Acquire(s.ctx(t), name, s.opts(dlock.WithWait(0))...)
	checkHeld(t, err, a, "Acquire with WithWait(0)")
}

// checkHeld checks a not-acquired error against the actual holder.
func checkHeld(t *testing.T, err error, holder *dlock.Lease, what string) {
	t.Helper()
	if !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("%s = %v, want ErrNotAcquired", what, err)
	}
	var held *dlock.HeldError
	if !errors.As(err, &held) {
		t.Fatalf("%s = %v, want a *dlock.HeldError", what, err)
	}
	if held.Name != holder.Name() {
		t.Errorf("%s: HeldError.Name = %q, want %q", what, held.Name, holder.Name())
	}
	if held.Owner != holderOwner {
		t.Errorf("%s: HeldError.Owner = %q, want %q", what, held.Owner, holderOwner)
	}
	if held.Fence != holder.Fence() {
		t.Errorf("%s: HeldError.Fence = %d, want the holder's %d", what, held.Fence, holder.Fence())
	}
}

// testCancelWait checks that canceling ctx mid-wait ends an unbounded wait
// promptly, with an error matching both ErrNotAcquired and ctx's error.
func (s *suite) testCancelWait(t *testing.T) {
	name := s.name(t)
	a := s.acquire(t, s.locker(t), name, dlock.WithTTL(s.longTTL()))
	defer release(t, a)
	ctx, cancel := context.WithCancel(s.ctx(t))
	time.AfterFunc(s.ttl/2, cancel)
	_, err := s.locker(t).Acquire(ctx, name, s.opts(dlock.WithWait(dlock.Forever))...)
	canceled := time.Now()
	if !errors.Is(err, dlock.ErrNotAcquired) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire canceled mid-wait = %v, want ErrNotAcquired and context.Canceled", err)
	}
	<-ctx.Done()
	if d := time.Since(canceled); d > s.slack() {
		t.Errorf("Acquire returned %s after ctx was canceled", d)
	}
	if a.Err() != nil {
		t.Errorf("the holder's lease ended: %v", a.Err())
	}
}

// testWakeUp checks that a waiter gets the lock after a release. When the
// driver notifies or queues, the waiter must be woken by the release
// itself, well before its (deliberately slow) polling would find it. A
// waiter that could not subscribe in time on a loaded machine polls, as
// it should; so a late wake-up is tried again, on a fresh name, up to
// wakeTries times, and only a release that never wakes its waiter fails.
func (s *suite) testWakeUp(t *testing.T) {
	var late []time.Duration
	for try := range wakeTries {
		latency, ok := s.wakeOnce(t, s.name(t, strconv.Itoa(try)))
		if !ok {
			return // failed already
		}
		t.Logf("waiter got the lock %s after the release", latency)
		if !s.notifies() || latency <= wakeBackoff/2 {
			return
		}
		late = append(late, latency)
	}
	t.Errorf("waiter got the lock %v after the release, in %d tries; the driver notifies or queues, so the release should wake it (this waiter's polling backoff is %s+)", late, wakeTries, wakeBackoff)
}

// wakeTries is how many times testWakeUp tries a wake-up that came late.
const wakeTries = 3

// wakeOnce has a waiter wait for name, held by another Locker, and
// returns how long after the release it got the lock; ok is false when
// the waiter failed (the test is failed then).
func (s *suite) wakeOnce(t *testing.T, name string) (latency time.Duration, ok bool) {
	a := s.acquire(t, s.locker(t), name, dlock.WithTTL(s.longTTL()))
	b := s.locker(t)
	got := make(chan time.Time, 1)
	var lb *dlock.Lease
	var errB error
	ctx := s.ctx(t)
	go func() {
		lb, errB = b.Acquire(ctx, name, s.opts(dlock.WithWait(s.longTTL()), dlock.WithBackoff(wakeBackoff, 4*wakeBackoff))...)
		got <- time.Now()
	}()
	time.Sleep(s.ttl / 2) // let B start waiting
	released := time.Now()
	release(t, a)
	at := <-got
	if errB != nil {
		t.Errorf("waiter's Acquire: %v", errB)
		return 0, false
	}
	release(t, lb)
	return at.Sub(released), true
}

// notifies reports whether the driver wakes waiters itself.
func (s *suite) notifies() bool { return s.provides(Notifier) || s.provides(Queuer) }
