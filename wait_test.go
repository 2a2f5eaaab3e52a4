package dlock_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/memlock"
)

// TestWaitNeverSleepsPastHolderTTL: without notifications, a waiter whose
// backoff is long still retries when the holder's TTL runs out.
func TestWaitNeverSleepsPastHolderTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memlock.NewStore()
		holder := memLocker(t, store)
		waiter := wrap(t, newCounting(t, store))
		defer waiter.Close()
		const ttl = 100 * time.Millisecond
		if _, err := holder.Acquire(t.Context(), "job", dlock.WithTTL(ttl), dlock.WithAutoRefresh(false)); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		ls, err := waiter.Acquire(t.Context(), "job", dlock.WithBackoff(time.Hour, time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took > ttl+2*time.Millisecond {
			t.Errorf("waiter got the lock %s after the holder's %s TTL", took, ttl)
		}
		_ = ls.Release(t.Context())
	})
}

// TestBackoffPolling: without notifications, attempts follow capped
// exponential backoff with full jitter: about wait/(max/2) of them.
func TestBackoffPolling(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memlock.NewStore()
		holder := memLocker(t, store)
		d := newCounting(t, store)
		waiter := wrap(t, d)
		defer waiter.Close()
		if _, err := holder.Acquire(t.Context(), "job", dlock.WithTTL(time.Hour)); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err := waiter.Acquire(t.Context(), "job", dlock.WithWait(10*time.Second), dlock.WithBackoff(10*time.Millisecond, 100*time.Millisecond))
		var he *dlock.HeldError
		if !errors.As(err, &he) || he.Waited != 10*time.Second || time.Since(start) != 10*time.Second {
			t.Fatalf("Acquire = %v after %s, want a HeldError after exactly the 10s wait", err, time.Since(start))
		}
		// Mean sleep at the cap is 50ms: about 200 attempts in 10s.
		if n := d.attempts.Load(); n < 120 || n > 400 {
			t.Errorf("%d attempts in 10s with backoff capped at 100ms, want about 200", n)
		}
	})
}

// TestNotifiedWaiter: with a Notifier (memlock), a waiter is woken by the
// release itself although its backoff would sleep for an hour.
func TestNotifiedWaiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memlock.NewStore()
		holder, waiter := memLocker(t, store), memLocker(t, store)
		ls, err := holder.Acquire(t.Context(), "job", dlock.WithTTL(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		time.AfterFunc(time.Second, func() { _ = ls.Release(context.Background()) })
		start := time.Now()
		got, err := waiter.Acquire(t.Context(), "job", dlock.WithBackoff(time.Hour, time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took != time.Second {
			t.Errorf("waiter got the lock after %s, want at the release (1s)", took)
		}
		if got.Fence() <= ls.Fence() {
			t.Errorf("waiter's fence %d, want > %d", got.Fence(), ls.Fence())
		}
		_ = got.Release(t.Context())
	})
}

// TestWaitBounds: the default wait is DefaultWait, Forever has no bound,
// and canceling ctx ends a wait at once with both sentinels.
func TestWaitBounds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memlock.NewStore()
		holder, waiter := memLocker(t, store), memLocker(t, store)
		ls, err := holder.Acquire(t.Context(), "job", dlock.WithTTL(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if _, err := waiter.Acquire(t.Context(), "job"); !errors.Is(err, dlock.ErrNotAcquired) || time.Since(start) != dlock.DefaultWait {
			t.Errorf("default wait: %v after %s, want ErrNotAcquired after %s", err, time.Since(start), dlock.DefaultWait)
		}
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(2*time.Second, cancel)
		start = time.Now()
		_, err = waiter.Acquire(ctx, "job", dlock.WithWait(dlock.Forever), dlock.WithBackoff(time.Minute, time.Hour))
		if !errors.Is(err, dlock.ErrNotAcquired) || !errors.Is(err, context.Canceled) || time.Since(start) != 2*time.Second {
			t.Errorf("canceled wait: %v after %s, want ErrNotAcquired+Canceled after 2s", err, time.Since(start))
		}
		time.AfterFunc(2*time.Hour, func() { _ = ls.Release(context.Background()) })
		got, err := waiter.Acquire(t.Context(), "job", dlock.WithWait(dlock.Forever), dlock.WithBackoff(time.Minute, time.Hour))
		if err != nil {
			t.Fatalf("Forever wait: %v", err)
		}
		_ = got.Release(t.Context())
	})
}

// lossyDriver applies every attempt but loses the first reply(s), as a
// timeout after the server applied the command would.
type lossyDriver struct {
	*countingDriver
	lose atomic.Int64 // replies still to lose
}

func (d *lossyDriver) TryAcquire(ctx context.Context, req driver.Request) (driver.Grant, error) {
	g, err := d.countingDriver.TryAcquire(ctx, req)
	if err == nil && d.lose.Add(-1) >= 0 {
		return driver.Grant{}, errDown
	}
	return g, err
}

// TestLostReplyRecognised: an attempt whose reply was lost is recognised
// as a grant by the next attempt (same token): no lock leaks until TTL.
func TestLostReplyRecognised(t *testing.T) {
	store := memlock.NewStore()
	d := &lossyDriver{countingDriver: newCounting(t, store)}
	d.lose.Store(1)
	l := wrap(t, d)
	defer l.Close()
	ctx := context.Background()
	ls, err := l.Acquire(ctx, "job", dlock.WithBackoff(time.Millisecond, time.Millisecond))
	if err != nil {
		t.Fatalf("Acquire after a lost reply: %v", err)
	}
	if ls.Fence() != 1 || d.attempts.Load() != 2 {
		t.Errorf("fence %d after %d attempts, want fence 1 after 2 (the lost grant recognised)", ls.Fence(), d.attempts.Load())
	}
	if err := ls.Release(ctx); err != nil {
		t.Fatal(err)
	}
	expectFree(t, memLocker(t, store), "job")
}

// TestAbandonedAttemptReleased: when the last attempt's reply is lost, the
// call fails with ErrBackend and releases whatever the attempt won.
func TestAbandonedAttemptReleased(t *testing.T) {
	store := memlock.NewStore()
	d := &lossyDriver{countingDriver: newCounting(t, store)}
	d.lose.Store(1)
	l := wrap(t, d)
	defer l.Close()
	_, err := l.TryAcquire(context.Background(), "job")
	if !errors.Is(err, dlock.ErrBackend) || !errors.Is(err, errDown) {
		t.Fatalf("TryAcquire = %v, want ErrBackend wrapping the transport error", err)
	}
	// The release runs in the background (the call returns by its
	// deadline); Close waits for it.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	expectFree(t, memLocker(t, store), "job")
}

// endingNotifier is a countingDriver that offers release notifications
// but ends every subscription at once (its channel closed), as a notifier
// whose connection dropped might.
type endingNotifier struct {
	*countingDriver
	watches atomic.Int64
}

func (d *endingNotifier) TryAcquire(ctx context.Context, req driver.Request) (driver.Grant, error) {
	if d.attempts.Load() > 100_000 {
		// A waiter that never sleeps never lets a synctest bubble's
		// clock advance: crash with a reason instead of hanging.
		panic("wait hot loop: 100000 attempts")
	}
	return d.countingDriver.TryAcquire(ctx, req)
}

func (d *endingNotifier) Watch(ctx context.Context, name string) (<-chan struct{}, func(), error) {
	d.watches.Add(1)
	ch := make(chan struct{})
	close(ch)
	return ch, func() {}, nil
}

// TestEndedSubscriptionIsPolled: a waiter whose release subscription the
// driver ended polls with its backoff from then on, instead of taking the
// closed channel for a release again and again.
func TestEndedSubscriptionIsPolled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memlock.NewStore()
		holder := memLocker(t, store)
		d := &endingNotifier{countingDriver: newCounting(t, store)}
		waiter := wrap(t, d)
		defer waiter.Close()
		if _, err := holder.Acquire(t.Context(), "job", dlock.WithTTL(time.Hour)); err != nil {
			t.Fatal(err)
		}
		_, err := waiter.Acquire(t.Context(), "job", dlock.WithWait(10*time.Second), dlock.WithBackoff(10*time.Millisecond, 100*time.Millisecond))
		if !errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatalf("Acquire = %v, want ErrNotAcquired after the 10s wait", err)
		}
		// Mean sleep at the cap is 50ms: about 200 attempts in 10s.
		if n := d.attempts.Load(); n < 120 || n > 400 {
			t.Errorf("%d attempts in 10s with backoff capped at 100ms, want about 200", n)
		}
		if n := d.watches.Load(); n != 1 {
			t.Errorf("%d subscriptions, want 1: an ended one is not renewed in the same wait", n)
		}
	})
}
