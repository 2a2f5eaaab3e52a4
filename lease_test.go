package dlock_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/memlock"
)

// TestReleaseAfterCanceledContext: Release frees the lock although the
// caller's context is canceled (its own, detached, bounded context).
func TestReleaseAfterCanceledContext(t *testing.T) {
	l, _ := newMem(t)
	ctx, cancel := context.WithCancel(context.Background())
	ls, err := l.Acquire(ctx, "job", dlock.WithTTL(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := ls.Release(ctx); err != nil {
		t.Fatalf("Release(canceled ctx) = %v", err)
	}
	expectFree(t, l, "job")
	if !errors.Is(ls.Err(), dlock.ErrReleased) {
		t.Errorf("Err = %v, want ErrReleased", ls.Err())
	}
	if err := ls.Release(ctx); !errors.Is(err, dlock.ErrReleased) {
		t.Errorf("second Release = %v, want ErrReleased", err)
	}
}

// TestContextCause: Lease.Context is canceled with the lease's Err as its
// cause, on release and on loss, and a Context taken after the end is
// born canceled.
func TestContextCause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, store := newMem(t)
		ls, err := l.Acquire(t.Context(), "job", dlock.WithTTL(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		parent, cancelParent := context.WithCancel(context.Background())
		ctx1 := ls.Context(parent)
		ctx2 := ls.Context(context.Background())
		cancelParent()
		if !errors.Is(context.Cause(ctx1), context.Canceled) || ctx2.Err() != nil {
			t.Fatalf("canceling one parent: causes %v, %v", context.Cause(ctx1), context.Cause(ctx2))
		}
		store.Expire("job")
		<-ctx2.Done()
		var le *dlock.LostError
		if !errors.As(context.Cause(ctx2), &le) || le.Reason != dlock.LostExpired || le.Name != "job" || le.Fence != ls.Fence() {
			t.Errorf("cause = %v, want LostError(expired) for job, fence %d", context.Cause(ctx2), ls.Fence())
		}
		late := ls.Context(context.Background())
		if !errors.Is(context.Cause(late), dlock.ErrLost) {
			t.Errorf("Context after loss: cause %v, want ErrLost", context.Cause(late))
		}
		if !errors.Is(ls.Release(t.Context()), dlock.ErrLost) {
			t.Error("Release after loss did not report ErrLost")
		}
	})
}

// TestLockerCloseReleases: Close releases every live lease (others can
// take them at once) and ends them with ErrReleased.
func TestLockerCloseReleases(t *testing.T) {
	store := newStore()
	l := memLocker(t, store)
	other := memLocker(t, store)
	ctx := context.Background()
	ls, err := l.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(ls.Err(), dlock.ErrReleased) {
		t.Errorf("lease Err after Close = %v, want ErrReleased", ls.Err())
	}
	expectFree(t, other, "job")
}

// TestRefreshNeverRecreates: Refresh of an expired lock is a loss, and the
// lock is not re-created.
func TestRefreshNeverRecreates(t *testing.T) {
	store := newStore()
	l := memLocker(t, store)
	ctx := context.Background()
	ls, err := l.Acquire(ctx, "job", dlock.WithAutoRefresh(false), dlock.WithTTL(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	store.Expire("job")
	if err := ls.Refresh(ctx, time.Hour); !errors.Is(err, dlock.ErrLost) {
		t.Fatalf("Refresh of a deleted lock = %v, want ErrLost", err)
	}
	if _, held, _ := l.Inspect(ctx, "job"); held {
		t.Error("Refresh re-created a deleted lock")
	}
}

// TestCloseEndsWaits: an Acquire waiting (even without a bound) when its
// Locker is closed gives up with ErrInvalidArgument instead of polling a
// closed driver.
func TestCloseEndsWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newStore()
		holder := memLocker(t, store)
		if _, err := holder.Acquire(t.Context(), "job", dlock.WithTTL(time.Hour)); err != nil {
			t.Fatal(err)
		}
		waiter, err := memlock.New(store)
		if err != nil {
			t.Fatal(err)
		}
		time.AfterFunc(time.Second, func() { _ = waiter.Close() })
		_, err = waiter.Acquire(t.Context(), "job", dlock.WithWait(dlock.Forever))
		if !errors.Is(err, dlock.ErrInvalidArgument) {
			t.Errorf("Acquire after Close = %v, want ErrInvalidArgument (Locker is closed)", err)
		}
	})
}
