package dlock_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dlockdev/dlock"
)

func TestDoReturnsFnErrorAndReleases(t *testing.T) {
	l, _ := newMem(t)
	ctx := context.Background()
	boom := errors.New("boom")
	var fence uint64
	err := dlock.Do(ctx, l, "job", func(ctx context.Context, ls *dlock.Lease) error {
		fence = ls.Fence()
		if ctx.Err() != nil {
			t.Error("fn's context canceled while the lease is held")
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Do = %v, want fn's error", err)
	}
	if fence == 0 {
		t.Error("fn saw fence 0")
	}
	expectFree(t, l, "job")
}

func TestDoReleasesWhenFnPanics(t *testing.T) {
	l, _ := newMem(t)
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the panic did not propagate")
			}
		}()
		_ = dlock.Do(context.Background(), l, "job", func(context.Context, *dlock.Lease) error {
			panic("fn failed")
		})
	}()
	expectFree(t, l, "job")
}

// TestDoCancelsFnOnLoss: fn's context is canceled (cause ErrLost) when the
// lease is lost, and Do reports the loss even when fn returns nil.
func TestDoCancelsFnOnLoss(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, store := newMem(t)
		err := dlock.Do(t.Context(), l, "job", func(ctx context.Context, _ *dlock.Lease) error {
			store.Steal("job", "thief", time.Hour)
			<-ctx.Done()
			if !errors.Is(context.Cause(ctx), dlock.ErrLost) {
				t.Errorf("fn's context cause = %v, want ErrLost", context.Cause(ctx))
			}
			return nil
		}, dlock.WithTTL(time.Second))
		var le *dlock.LostError
		if !errors.As(err, &le) || le.Reason != dlock.LostTakenOver {
			t.Errorf("Do = %v, want a LostError (taken over)", err)
		}
	})
}

func TestDoNotAcquired(t *testing.T) {
	l, _ := newMem(t)
	ctx := context.Background()
	held, err := l.Acquire(ctx, "job", dlock.WithOwner("other"))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(ctx)
	ran := false
	err = dlock.Do(ctx, l, "job", func(context.Context, *dlock.Lease) error { ran = true; return nil }, dlock.WithWait(0))
	var he *dlock.HeldError
	if !errors.As(err, &he) || he.Owner != "other" || he.Fence != held.Fence() || ran {
		t.Errorf("Do on a held lock = %v (fn ran: %v), want a HeldError naming owner %q", err, ran, "other")
	}
}

func TestAcquireAllSortedDeduplicated(t *testing.T) {
	l, _ := newMem(t)
	ctx := context.Background()
	leases, err := l.AcquireAll(ctx, []string{"c", "a", "b", "a"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ls := range leases {
		names = append(names, ls.Name())
	}
	if !slices.Equal(names, []string{"a", "b", "c"}) {
		t.Errorf("leases for %v, want [a b c]", names)
	}
	if err := dlock.ReleaseAll(ctx, leases); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		expectFree(t, l, n)
	}
}

// TestAcquireAllAllOrNothing: when one lock is held, the others taken so
// far are released and the error names the held one.
func TestAcquireAllAllOrNothing(t *testing.T) {
	l, _ := newMem(t)
	ctx := context.Background()
	held, err := l.Acquire(ctx, "b", dlock.WithOwner("holder-of-b"))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(ctx)
	start := time.Now()
	_, err = l.AcquireAll(ctx, []string{"c", "b", "a"}, dlock.WithWait(100*time.Millisecond))
	var he *dlock.HeldError
	if !errors.As(err, &he) || he.Name != "b" || he.Owner != "holder-of-b" {
		t.Fatalf("AcquireAll = %v, want a HeldError for b", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("AcquireAll took %s with a 100ms wait bound", took)
	}
	expectFree(t, l, "a")
	expectFree(t, l, "c")
}

// TestAcquireAllOppositeOrders never deadlocks (in-process; the conformance
// suite repeats it across processes).
func TestAcquireAllOppositeOrders(t *testing.T) {
	l, _ := newMem(t)
	ctx := context.Background()
	done := make(chan error, 2)
	for _, names := range [][]string{{"x", "y"}, {"y", "x"}} {
		go func() {
			for range 200 {
				leases, err := l.AcquireAll(ctx, names, dlock.WithWait(10*time.Second), dlock.WithBackoff(time.Millisecond, 5*time.Millisecond))
				if err != nil {
					done <- err
					return
				}
				_ = dlock.ReleaseAll(ctx, leases)
			}
			done <- nil
		}()
	}
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

func expectFree(t *testing.T, l *dlock.Locker, name string) {
	t.Helper()
	ls, err := l.TryAcquire(context.Background(), name)
	if err != nil {
		t.Fatalf("%q still held: %v", name, err)
	}
	_ = ls.Release(context.Background())
}
