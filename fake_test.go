package dlock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/memlock"
)

// errDown is the transport failure a countingDriver injects.
var errDown = errors.New("connection refused (injected)")

// countingDriver wraps memlock's driver, hiding its optional interfaces
// (no notification, no batching), counting calls and injecting transport
// failures. It lets the tests watch the portable layer's timing.
type countingDriver struct {
	inner     driver.Driver
	down      atomic.Bool
	attempts  atomic.Int64
	refreshes atomic.Int64

	mu    sync.Mutex
	times []time.Time // of every Refresh call
}

func newCounting(t testing.TB, store *memlock.Store) *countingDriver {
	t.Helper()
	l, err := memlock.New(store)
	if err != nil {
		t.Fatal(err)
	}
	return &countingDriver{inner: l.Driver()}
}

func (d *countingDriver) TryAcquire(ctx context.Context, req driver.Request) (driver.Grant, error) {
	d.attempts.Add(1)
	if d.down.Load() {
		return driver.Grant{}, errDown
	}
	return d.inner.TryAcquire(ctx, req)
}

func (d *countingDriver) Refresh(ctx context.Context, name, token string, ttl time.Duration) error {
	if d.refreshes.Add(1) > 100_000 {
		// A watchdog retrying in a hot loop never lets a synctest bubble's
		// clock advance: crash with a reason instead of hanging.
		panic("watchdog refresh hot loop: 100000 calls")
	}
	d.mu.Lock()
	d.times = append(d.times, time.Now())
	d.mu.Unlock()
	if d.down.Load() {
		return errDown
	}
	return d.inner.Refresh(ctx, name, token, ttl)
}

func (d *countingDriver) Release(ctx context.Context, name, token string) error {
	if d.down.Load() {
		return errDown
	}
	return d.inner.Release(ctx, name, token)
}

func (d *countingDriver) Close() error { return nil }

func (d *countingDriver) refreshTimes() []time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]time.Time(nil), d.times...)
}

// batchingDriver adds driver.BatchRefresher to a countingDriver.
type batchingDriver struct {
	*countingDriver
	batches atomic.Int64
	items   atomic.Int64
}

func (d *batchingDriver) RefreshBatch(ctx context.Context, items []driver.RefreshItem) ([]error, error) {
	d.batches.Add(1)
	d.items.Add(int64(len(items)))
	return d.inner.(driver.BatchRefresher).RefreshBatch(ctx, items)
}

// newMem returns a Locker on a fresh private memlock Store.
func newMem(t testing.TB, opts ...dlock.Option) (*dlock.Locker, *memlock.Store) {
	t.Helper()
	store := memlock.NewStore()
	l, err := memlock.New(store, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l, store
}

func wrap(t testing.TB, d driver.Driver, opts ...dlock.Option) *dlock.Locker {
	t.Helper()
	l, err := dlock.NewLocker(d, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func newStore() *memlock.Store { return memlock.NewStore() }

func memLocker(t testing.TB, store *memlock.Store) *dlock.Locker {
	t.Helper()
	l, err := memlock.New(store)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}
