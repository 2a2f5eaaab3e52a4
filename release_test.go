package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/memlock"
)

// batchReleasingDriver adds driver.BatchReleaser to a countingDriver and
// counts its round trips.
type batchReleasingDriver struct {
	*countingDriver
	calls, items atomic.Int64
}

func (d *batchReleasingDriver) ReleaseBatch(ctx context.Context, items []driver.ReleaseItem) ([]error, error) {
	d.calls.Add(1)
	d.items.Add(int64(len(items)))
	if d.down.Load() {
		return nil, errDown
	}
	results := make([]error, len(items))
	for i, it := range items {
		results[i] = d.inner.Release(ctx, it.Name, it.Token)
	}
	return results, nil
}

// TestCloseReleasesInBatches: Close frees 2,500 leases in three calls of
// at most 1,000, and each lease ends released.
func TestCloseReleasesInBatches(t *testing.T) {
	store := memlock.NewStore()
	d := &batchReleasingDriver{countingDriver: newCounting(t, store)}
	l := wrap(t, d)
	var leases []*dlock.Lease
	for i := range 2500 {
		ls, err := l.TryAcquire(t.Context(), fmt.Sprintf("n%d", i))
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, ls)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if d.calls.Load() != 3 || d.items.Load() != 2500 {
		t.Errorf("Close sent %d batches of %d items in all, want 3 batches, 2500 items", d.calls.Load(), d.items.Load())
	}
	for _, ls := range leases {
		if !errors.Is(ls.Err(), dlock.ErrReleased) {
			t.Fatalf("lease %s: Err = %v, want ErrReleased", ls.Name(), ls.Err())
		}
	}
	expectFree(t, memLocker(t, store), "n0")
	expectFree(t, memLocker(t, store), "n2499")
}

// TestReleaseAllBatchOutcomes: ReleaseAll batches, reports a lease that was
// lost as ErrLost and a transport failure as ErrBackend, and a second call
// gives the first outcome.
func TestReleaseAllBatchOutcomes(t *testing.T) {
	store := memlock.NewStore()
	d := &batchReleasingDriver{countingDriver: newCounting(t, store)}
	l := wrap(t, d)
	defer l.Close()
	a, _ := l.TryAcquire(t.Context(), "a")
	b, _ := l.TryAcquire(t.Context(), "b")
	if a == nil || b == nil {
		t.Fatal("setup: acquire failed")
	}
	admin := memLocker(t, store)
	if _, _, _, err := admin.ForceRelease(t.Context(), "b"); err != nil {
		t.Fatal(err)
	}
	err := dlock.ReleaseAll(t.Context(), []*dlock.Lease{a, b})
	if !errors.Is(err, dlock.ErrLost) || d.calls.Load() != 1 {
		t.Fatalf("ReleaseAll = %v after %d calls, want ErrLost for the force-released lease, one call", err, d.calls.Load())
	}
	if !errors.Is(a.Err(), dlock.ErrReleased) {
		t.Errorf("a: Err = %v, want ErrReleased", a.Err())
	}
	c, _ := l.TryAcquire(t.Context(), "c")
	d.down.Store(true)
	if err := dlock.ReleaseAll(t.Context(), []*dlock.Lease{c}); !errors.Is(err, dlock.ErrBackend) {
		t.Errorf("ReleaseAll on a down backend = %v, want ErrBackend", err)
	}
	d.down.Store(false)
	if err := dlock.ReleaseAll(t.Context(), []*dlock.Lease{a}); !errors.Is(err, dlock.ErrReleased) {
		t.Errorf("second ReleaseAll = %v, want ErrReleased", err)
	}
}
