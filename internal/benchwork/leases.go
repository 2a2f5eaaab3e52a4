package benchwork

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/driver"
)

// RefreshCounter is a driver that passes every call to the driver it
// wraps and counts the refreshes the watchdog sends: calls (one per
// RefreshBatch or Refresh) and the leases they carry. It is always a
// BatchRefresher and BatchReleaser: when the wrapped driver is not, it
// does what the portable layer would do without them (one call per lease,
// concurrently), so a Locker over it behaves as one over the wrapped
// driver. It does not pass on Notifier or Queuer: use it for holding
// leases, not for waiting on them.
type RefreshCounter struct {
	drv          driver.Driver
	calls, items atomic.Int64
}

// CountRefreshes wraps drv; build the Locker with dlock.NewLocker.
func CountRefreshes(drv driver.Driver) *RefreshCounter { return &RefreshCounter{drv: drv} }

// Counts returns the refresh calls made so far and the leases they carried.
func (r *RefreshCounter) Counts() (calls, leases int64) { return r.calls.Load(), r.items.Load() }

// TryAcquire passes on.
func (r *RefreshCounter) TryAcquire(ctx context.Context, req driver.Request) (driver.Grant, error) {
	return r.drv.TryAcquire(ctx, req)
}

// Refresh counts one call of one lease and passes on.
func (r *RefreshCounter) Refresh(ctx context.Context, name, token string, ttl time.Duration) error {
	r.calls.Add(1)
	r.items.Add(1)
	return r.drv.Refresh(ctx, name, token, ttl)
}

// RefreshBatch counts one call of len(items) leases when the wrapped
// driver batches, else one Refresh per item.
func (r *RefreshCounter) RefreshBatch(ctx context.Context, items []driver.RefreshItem) ([]error, error) {
	if br, ok := r.drv.(driver.BatchRefresher); ok {
		r.calls.Add(1)
		r.items.Add(int64(len(items)))
		return br.RefreshBatch(ctx, items)
	}
	return each(len(items), func(i int) error { return r.Refresh(ctx, items[i].Name, items[i].Token, items[i].TTL) }), nil
}

// Release passes on.
func (r *RefreshCounter) Release(ctx context.Context, name, token string) error {
	return r.drv.Release(ctx, name, token)
}

// ReleaseBatch passes on, or releases one by one when the wrapped driver
// does not batch.
func (r *RefreshCounter) ReleaseBatch(ctx context.Context, items []driver.ReleaseItem) ([]error, error) {
	if br, ok := r.drv.(driver.BatchReleaser); ok {
		return br.ReleaseBatch(ctx, items)
	}
	return each(len(items), func(i int) error { return r.drv.Release(ctx, items[i].Name, items[i].Token) }), nil
}

// Capabilities are the wrapped driver's.
func (r *RefreshCounter) Capabilities() driver.Capabilities {
	if d, ok := r.drv.(driver.Describer); ok {
		return d.Capabilities()
	}
	return driver.Capabilities{}
}

// Close closes the wrapped driver.
func (r *RefreshCounter) Close() error { return r.drv.Close() }

// each runs fn(0..n-1) concurrently and returns the results in order.
func each(n int, fn func(i int) error) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = fn(i) })
	}
	wg.Wait()
	return errs
}

// Hold is the lease-holding workload: take N leases on one Locker and
// keep them for a while, so that only the watchdog's refreshes reach the
// backend.
type Hold struct {
	// Locker is built over Counter (dlock.NewLocker(Counter, ...)).
	Locker  *dlock.Locker
	Counter *RefreshCounter
	// N leases named Name(Prefix, i) are taken by Workers goroutines with
	// TryAcquire and Opts, then held For.
	N, Workers int
	Prefix     string
	For        time.Duration
	Opts       []dlock.Option
	// Mark, if set, is called when every lease is held (held true) and
	// when the hold ends, before any release (held false): the moments
	// between which round trips are the refreshes' cost.
	Mark func(held bool)
	// ReleaseWait, if positive, bounds the wait for the release of the
	// leases after the hold: past it, Run closes Counter (the driver
	// under the Locker), so that a release slower than that ends, failed,
	// instead of holding up the run.
	ReleaseWait time.Duration
}

// Holding is the outcome of a Hold.
type Holding struct {
	// Leases is how many leases were held; Acquire the time taken to take
	// them; Held how long they were held.
	Leases  int
	Acquire time.Duration
	Held    time.Duration
	// Calls and Refreshes are the refresh calls the watchdog made during
	// the hold and the leases they carried.
	Calls, Refreshes int64
	// Lost counts leases lost during the hold; it must be 0. FirstLost is
	// the Err of the first of them, in the order taken ("" when none).
	Lost      int
	FirstLost string
	// Release is how long releasing every lease took (ReleaseAll, after
	// the hold); Released is false when it took longer than ReleaseWait
	// and was cut short.
	Release  time.Duration
	Released bool
	// HeapPerLease is the client's Go heap in use after every lease was
	// taken minus before the first, over Leases, in bytes: each side read
	// with runtime.ReadMemStats (HeapAlloc) right after a runtime.GC, so
	// it counts what the leases keep alive, not their garbage. The
	// workers first take a lease each, together (warm), so that the
	// client's fixed costs, the connections its pool opens for them, are
	// not counted as the leases'. What the client grows
	// beyond that while taking them is counted, and weighs less as
	// Leases grows.
	HeapPerLease float64
}

// Run takes the leases, holds them, counts, and releases them all.
func (h Hold) Run(ctx context.Context) (r Holding, err error) {
	if h.N < 1 || h.Workers < 1 {
		return Holding{}, fmt.Errorf("benchwork: hold %d leases with %d workers: both must be at least 1", h.N, h.Workers)
	}
	warm, err := h.warm(ctx)
	if err != nil {
		r.Release, r.Released = h.release(ctx, warm)
		return Holding{}, err
	}
	heap0 := heapInUse()
	t0 := time.Now()
	leases, err := h.take(ctx)
	defer func() { r.Release, r.Released = h.release(ctx, append(leases, warm...)) }()
	if err != nil {
		return Holding{}, err
	}
	r = Holding{Leases: len(leases), Acquire: time.Since(t0)}
	r.HeapPerLease = float64(int64(heapInUse())-int64(heap0)) / float64(len(leases))
	r.Calls, r.Refreshes = h.Counter.Counts()
	h.mark(true)
	t1 := time.Now()
	select {
	case <-time.After(h.For):
	case <-ctx.Done():
		return Holding{}, ctx.Err()
	}
	r.Held = time.Since(t1)
	h.mark(false)
	calls, items := h.Counter.Counts()
	r.Calls, r.Refreshes = calls-r.Calls, items-r.Refreshes
	for _, ls := range leases {
		if err := ls.Err(); err != nil {
			if r.Lost++; r.Lost == 1 {
				r.FirstLost = err.Error()
			}
		}
	}
	return r, nil
}

// release releases leases and returns how long it took, waiting at most
// ReleaseWait; past it, it closes Counter's driver, which makes what is
// left of the release fail at once, waits for that and reports false.
func (h Hold) release(ctx context.Context, leases []*dlock.Lease) (time.Duration, bool) {
	t0 := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = dlock.ReleaseAll(context.WithoutCancel(ctx), leases)
	}()
	var timeout <-chan time.Time
	if h.ReleaseWait > 0 {
		timeout = time.After(h.ReleaseWait)
	}
	select {
	case <-done:
		return time.Since(t0), true
	case <-timeout:
		_ = h.Counter.Close()
		<-done
		return h.ReleaseWait, false
	}
}

// heapInUse is the Go heap in use after a collection, in bytes.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func (h Hold) mark(held bool) {
	if h.Mark != nil {
		h.Mark(held)
	}
}

// warm has the workers take a lease each, at the same time, so that the
// client opens the connections they use before the heap is first read.
// The leases are released with the others; they are not refreshed, so
// that the refreshes counted are the others'.
func (h Hold) warm(ctx context.Context) ([]*dlock.Lease, error) {
	leases := make([]*dlock.Lease, h.Workers)
	errs := make([]error, h.Workers)
	var wg sync.WaitGroup
	for w := range h.Workers {
		wg.Go(func() {
			leases[w], errs[w] = h.Locker.TryAcquire(ctx, Name(h.Prefix+"warm/", w), append(slices.Clone(h.Opts), dlock.WithAutoRefresh(false))...)
		})
	}
	wg.Wait()
	held := make([]*dlock.Lease, 0, h.Workers)
	for _, ls := range leases {
		if ls != nil {
			held = append(held, ls)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return held, fmt.Errorf("benchwork: warm-up: %w", err)
	}
	return held, nil
}

// takeAttempts bounds the attempts on one lease: a backend may fail one
// under the load of taking thousands (a Redlock node timeout).
const takeAttempts = 3

// tryAcquire takes name, trying again after a failure other than "held".
func (h Hold) tryAcquire(ctx context.Context, name string) (ls *dlock.Lease, err error) {
	for range takeAttempts {
		ls, err = h.Locker.TryAcquire(ctx, name, h.Opts...)
		if err == nil || errors.Is(err, dlock.ErrNotAcquired) || ctx.Err() != nil {
			return ls, err
		}
	}
	return nil, err
}

// take acquires the N leases; on error the ones taken are returned too,
// for release.
func (h Hold) take(ctx context.Context) ([]*dlock.Lease, error) {
	leases := make([]*dlock.Lease, h.N)
	errs := make([]error, h.Workers)
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range h.Workers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < h.N && errs[w] == nil; i = int(next.Add(1) - 1) {
				leases[i], errs[w] = h.tryAcquire(ctx, Name(h.Prefix, i))
			}
		})
	}
	wg.Wait()
	held := make([]*dlock.Lease, 0, h.N)
	for _, ls := range leases {
		if ls != nil {
			held = append(held, ls)
		}
	}
	for _, err := range errs {
		if err != nil {
			return held, fmt.Errorf("benchwork: took %d of %d leases, then: %w", len(held), h.N, err)
		}
	}
	return held, nil
}
