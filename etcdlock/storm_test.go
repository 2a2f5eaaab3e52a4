package etcdlock_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/internal/testing/testserver"
)

// TestCancellationStormAboveWaitLease: 100 waiters with a TTL above the
// wait lease, on two Lockers, queue behind a holder and cancel after a
// random 0–50 ms, while their keys are being put under the wait lease,
// queued, or (for none of them, the holder holds) moved. None is granted
// while the holder holds; once it releases, a TryAcquire gets the lock at
// once, and the waiters leave no key behind, also a moment later.
func TestCancellationStormAboveWaitLease(t *testing.T) {
	const ttl, waiters = 3 * time.Second, 100
	srv := testserver.Etcd(t)
	admin := client(t, srv.Endpoint)
	ctx := context.Background()
	name := "storm/" + t.Name()
	held, err := locker(t, srv.Endpoint).Acquire(ctx, name, dlock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	ls := []*dlock.Locker{locker(t, srv.Endpoint), locker(t, srv.Endpoint)}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var granted []uint64
	for i := range waiters {
		wg.Go(func() {
			wctx, cancel := context.WithTimeout(ctx, time.Duration(rand.N(50))*time.Millisecond)
			defer cancel()
			l, err := ls[i%2].Acquire(wctx, name, dlock.WithTTL(ttl), dlock.WithWait(dlock.Forever))
			if err == nil {
				mu.Lock()
				granted = append(granted, l.Fence())
				mu.Unlock()
				_ = l.Release(ctx)
			} else if !errors.Is(err, dlock.ErrNotAcquired) && !errors.Is(err, dlock.ErrBackend) {
				t.Errorf("waiter %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if len(granted) > 0 {
		t.Errorf("%d waiters granted while the holder held (fences %v)", len(granted), granted)
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	next, err := locker(t, srv.Endpoint).TryAcquire(ctx, name, dlock.WithTTL(ttl))
	if err != nil {
		t.Fatalf("TryAcquire right after the storm and the release: %v", err)
	}
	if err := next.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for _, after := range []time.Duration{0, time.Second} {
		time.Sleep(after)
		if kvs := contenders(t, admin, name); len(kvs) > 0 {
			t.Errorf("%s after the storm: %d keys left, first %s (lease %x)", after, len(kvs), kvs[0].Key, kvs[0].Lease)
		}
	}
}
