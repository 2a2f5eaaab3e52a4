package dlock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/memlock"
)

// frozenDriver is a backend that stops answering (a SIGSTOPped server):
// while frozen every call blocks until its context ends. A refresh sent
// while frozen is applied when the backend thaws, as a stalled server
// applies the commands queued in its socket: it "lands late".
type frozenDriver struct {
	*countingDriver
	mu       sync.Mutex
	frozen   bool
	thaw     chan struct{}
	late     []func()
	releases []string // tokens of Release calls that reached the backend
}

func newFrozen(t testing.TB, store *memlock.Store) *frozenDriver {
	return &frozenDriver{countingDriver: newCounting(t, store), thaw: make(chan struct{})}
}

func (d *frozenDriver) freeze() {
	d.mu.Lock()
	d.frozen, d.thaw = true, make(chan struct{})
	d.mu.Unlock()
}

func (d *frozenDriver) unfreeze() {
	d.mu.Lock()
	d.frozen = false
	late := d.late
	d.late = nil
	close(d.thaw)
	d.mu.Unlock()
	for _, f := range late {
		f()
	}
}

// stall blocks while the backend is frozen; it returns ctx's error when ctx
// ends first, with apply queued to run at the thaw when given.
func (d *frozenDriver) stall(ctx context.Context, apply func()) error {
	d.mu.Lock()
	if !d.frozen {
		d.mu.Unlock()
		return nil
	}
	thaw := d.thaw
	if apply != nil {
		d.late = append(d.late, apply)
	}
	d.mu.Unlock()
	select {
	case <-thaw:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (d *frozenDriver) TryAcquire(ctx context.Context, req driver.Request) (driver.Grant, error) {
	if err := d.stall(ctx, nil); err != nil {
		return driver.Grant{}, err
	}
	return d.countingDriver.TryAcquire(ctx, req)
}

func (d *frozenDriver) Refresh(ctx context.Context, name, token string, ttl time.Duration) error {
	inner := d.inner
	if err := d.stall(ctx, func() { _ = inner.Refresh(context.Background(), name, token, ttl) }); err != nil {
		return err
	}
	return d.countingDriver.Refresh(ctx, name, token, ttl)
}

func (d *frozenDriver) Release(ctx context.Context, name, token string) error {
	if err := d.stall(ctx, nil); err != nil {
		return err
	}
	d.mu.Lock()
	d.releases = append(d.releases, token)
	d.mu.Unlock()
	return d.countingDriver.Release(ctx, name, token)
}

// TestOutageIsNotHeld: a backend that does not answer is never reported as
// a conflict, whether the lock is free or held elsewhere, and the call
// returns exactly at the caller's deadline, cleanup included.
func TestOutageIsNotHeld(t *testing.T) {
	for _, heldElsewhere := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			store := memlock.NewStore()
			if heldElsewhere {
				if _, err := memLocker(t, store).TryAcquire(t.Context(), "outage-free"); err != nil {
					t.Fatal(err)
				}
			}
			d := newFrozen(t, store)
			l := wrap(t, d)
			defer l.Close()
			defer d.unfreeze()
			d.freeze()
			ctx, cancel := context.WithTimeout(t.Context(), 1500*time.Millisecond)
			defer cancel()
			start := time.Now()
			_, err := l.TryAcquire(ctx, "outage-free")
			if took := time.Since(start); took != 1500*time.Millisecond {
				t.Errorf("TryAcquire returned after %s, want exactly the 1.5s deadline", took)
			}
			if errors.Is(err, dlock.ErrNotAcquired) {
				t.Fatalf("held elsewhere=%v: TryAcquire = %v: an outage reported as a conflict", heldElsewhere, err)
			}
			if !errors.Is(err, dlock.ErrBackend) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("TryAcquire = %v, want ErrBackend and DeadlineExceeded", err)
			}
		})
	}
}

// TestOutageDuringWait: a waiter that saw the holder and then lost the
// backend reports the conflict it saw; one that never got an answer
// reports the outage; in both cases by the wait bound.
func TestOutageDuringWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memlock.NewStore()
		if _, err := memLocker(t, store).TryAcquire(t.Context(), "w"); err != nil {
			t.Fatal(err)
		}
		d := newFrozen(t, store)
		l := wrap(t, d)
		defer l.Close()
		defer d.unfreeze()
		go func() {
			time.Sleep(100 * time.Millisecond) // after the first answer
			d.freeze()
		}()
		start := time.Now()
		_, err := l.Acquire(t.Context(), "w", dlock.WithWait(time.Second))
		if took := time.Since(start); took != time.Second {
			t.Errorf("Acquire returned after %s, want the 1s wait bound", took)
		}
		var held *dlock.HeldError
		if !errors.As(err, &held) || held.Owner == "" {
			t.Fatalf("Acquire = %v, want a HeldError naming the holder seen before the outage", err)
		}

		d.unfreeze()
		d.freeze()
		_, err = l.Acquire(t.Context(), "w", dlock.WithWait(time.Second))
		if errors.Is(err, dlock.ErrNotAcquired) || !errors.Is(err, dlock.ErrBackend) {
			t.Fatalf("Acquire with no answer at all = %v, want ErrBackend, not ErrNotAcquired", err)
		}
	})
}

// queueDriver is a driver.Queuer that never answers while frozen.
type queueDriver struct{ *frozenDriver }

func (d queueDriver) AcquireWait(ctx context.Context, req driver.Request) (driver.Grant, error) {
	if err := d.stall(ctx, nil); err != nil {
		return driver.Grant{}, err
	}
	return d.countingDriver.TryAcquire(ctx, req)
}

// TestQueuedOutageIsNotHeld: a Queuer that ends with the context and names
// no holder is an outage, not a conflict.
func TestQueuedOutageIsNotHeld(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := queueDriver{newFrozen(t, memlock.NewStore())}
		l := wrap(t, d)
		defer l.Close()
		defer d.unfreeze()
		d.freeze()
		_, err := l.Acquire(t.Context(), "q", dlock.WithWait(time.Second))
		if errors.Is(err, dlock.ErrNotAcquired) || !errors.Is(err, dlock.ErrBackend) {
			t.Fatalf("queued Acquire on a frozen backend = %v, want ErrBackend, not ErrNotAcquired", err)
		}
	})
}

// permanentDriver fails every attempt with a permanent error.
type permanentDriver struct{ *countingDriver }

var errNoSchema = errors.New(`relation "dlock_leases" does not exist (injected)`)

func (d permanentDriver) TryAcquire(ctx context.Context, req driver.Request) (driver.Grant, error) {
	d.attempts.Add(1)
	return driver.Grant{}, driver.Permanent(errNoSchema)
}

// TestPermanentErrorFailsAtOnce: an error retrying cannot cure ends the
// wait at the first attempt instead of being retried until the bound.
func TestPermanentErrorFailsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := permanentDriver{newCounting(t, memlock.NewStore())}
		l := wrap(t, d)
		defer l.Close()
		start := time.Now()
		_, err := l.Acquire(t.Context(), "p", dlock.WithWait(5*time.Second))
		if took := time.Since(start); took != 0 || d.attempts.Load() != 1 {
			t.Errorf("gave up after %s and %d attempts, want at once after 1", took, d.attempts.Load())
		}
		if !errors.Is(err, dlock.ErrBackend) || !errors.Is(err, errNoSchema) || errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatalf("Acquire = %v, want ErrBackend wrapping the cause", err)
		}
	})
}

// TestLostLeaseReleasedWhenBackendAnswers: a refresh in flight when the
// watchdog declares the lease lost lands after the loss and extends the
// lock; the portable layer releases it as soon as the backend answers, so
// the next holder does not wait a whole TTL for a lock nobody holds.
func TestLostLeaseReleasedWhenBackendAnswers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memlock.NewStore()
		d := newFrozen(t, store)
		l := wrap(t, d)
		defer l.Close()
		const ttl = 12 * time.Second
		ls, err := l.Acquire(t.Context(), "late", dlock.WithTTL(ttl))
		if err != nil {
			t.Fatal(err)
		}
		d.freeze()
		<-ls.Done()
		if !errors.Is(ls.Err(), dlock.ErrLost) {
			t.Fatalf("Err = %v, want ErrLost", ls.Err())
		}
		time.Sleep(time.Second)
		d.unfreeze() // the late refreshes land now, extending the lock
		time.Sleep(ttl / 2)
		synctest.Wait()
		other := memLocker(t, store)
		if _, err := other.TryAcquire(t.Context(), "late"); err != nil {
			t.Fatalf("lock still held %s after the backend answered again: %v", ttl/2, err)
		}
	})
}

// TestLostLeaseNotReleasedTwice: the negative control of the above: with
// the lease released by the portable layer, the tokens that reach the
// backend are those of the lost lease only.
func TestLostLeaseReleaseIsTokenChecked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memlock.NewStore()
		d := newFrozen(t, store)
		l := wrap(t, d)
		const ttl = 3 * time.Second
		ls, err := l.Acquire(t.Context(), "tok", dlock.WithTTL(ttl))
		if err != nil {
			t.Fatal(err)
		}
		d.freeze()
		<-ls.Done()
		d.unfreeze()
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		if len(d.releases) == 0 {
			t.Fatal("the lost lease was never released on the backend")
		}
		for _, tok := range d.releases {
			if tok != ls.Token() {
				t.Errorf("released token %s, want only the lost lease's %s", tok, ls.Token())
			}
		}
	})
}

// TestReleaseHonoursDeadline: a release on a frozen backend gives up at the
// caller's deadline when that is nearer than its own 5 s (with 250 ms at
// least, even for a deadline already past), and at 5 s without one.
func TestReleaseHonoursDeadline(t *testing.T) {
	for _, c := range []struct {
		deadline time.Duration // 0: none; negative: already past
		want     time.Duration
	}{{time.Second, time.Second}, {-time.Second, 250 * time.Millisecond}, {0, 5 * time.Second}} {
		synctest.Test(t, func(t *testing.T) {
			d := newFrozen(t, memlock.NewStore())
			l := wrap(t, d)
			defer l.Close()
			defer d.unfreeze()
			ls, err := l.TryAcquire(t.Context(), "r")
			if err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			if c.deadline != 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, c.deadline)
				defer cancel()
			}
			d.freeze()
			start := time.Now()
			err = ls.Release(ctx)
			if took := time.Since(start); took != c.want {
				t.Errorf("deadline %s: Release took %s, want %s", c.deadline, took, c.want)
			}
			if !errors.Is(err, dlock.ErrBackend) {
				t.Errorf("Release on a frozen backend = %v, want ErrBackend", err)
			}
		})
	}
}

// sinceDriver grants with a Since one second before the attempt, as a
// grant on a shared lease renewed earlier does.
type sinceDriver struct{ *countingDriver }

func (d sinceDriver) TryAcquire(ctx context.Context, req driver.Request) (driver.Grant, error) {
	g, err := d.countingDriver.TryAcquire(ctx, req)
	g.Since = time.Now().Add(-time.Second)
	return g, err
}

// TestGrantSinceCounts: a grant whose TTL started before the attempt
// (Grant.Since) expires locally that much earlier.
func TestGrantSinceCounts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := wrap(t, sinceDriver{newCounting(t, memlock.NewStore())})
		defer l.Close()
		const ttl = 10 * time.Second
		ls, err := l.TryAcquire(t.Context(), "s", dlock.WithTTL(ttl), dlock.WithAutoRefresh(false))
		if err != nil {
			t.Fatal(err)
		}
		want := time.Now().Add(-time.Second).Add(ttl - ttl/100 - 2*time.Millisecond)
		if got := ls.Expires(); !got.Equal(want) {
			t.Errorf("Expires %s after now, want %s (counted from Since)", time.Until(got), time.Until(want))
		}
	})
}

// flakyQueue is a driver.Queuer whose first AcquireWait fails with a
// transport error (a connection closed by a server restart).
type flakyQueue struct {
	*countingDriver
	calls atomic.Int64
}

func (d *flakyQueue) AcquireWait(ctx context.Context, req driver.Request) (driver.Grant, error) {
	if d.calls.Add(1) == 1 {
		return driver.Grant{}, errDown
	}
	return d.countingDriver.TryAcquire(ctx, req)
}

// TestQueuedWaitRetriesTransportErrors: a queued wait that fails for a
// transport reason is retried within the wait bound, not given up.
func TestQueuedWaitRetriesTransportErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := &flakyQueue{countingDriver: newCounting(t, memlock.NewStore())}
		l := wrap(t, d)
		defer l.Close()
		ls, err := l.Acquire(t.Context(), "q", dlock.WithWait(time.Second))
		if err != nil {
			t.Fatalf("Acquire after one failed queued wait = %v, want a grant on the retry", err)
		}
		if d.calls.Load() != 2 {
			t.Errorf("%d AcquireWait calls, want 2", d.calls.Load())
		}
		_ = ls.Release(t.Context())
	})
}
