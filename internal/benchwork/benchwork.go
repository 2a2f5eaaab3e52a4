// Package benchwork measures the two lock workloads that every backend's
// benchmarks share: uncontended acquire+release cycles, each goroutine on
// its own name, and contended handoffs of one name between workers; a
// third, holding many leases at once while the watchdog refreshes them;
// and Failover, the time an election takes to elect a standby after its
// leader's process is killed.
// The workloads take callbacks, so one harness measures dlock Lockers and
// each backend's baseline (raw advisory locks, etcd's concurrency.Mutex, a
// hand-written Redis script, ...) alike.
//
// A run is bounded by a Budget: a fixed count of operations (Count, for a
// *testing.B and its b.N) or a wall-clock duration (For, for `dlock
// bench`). RunCycles and RunContended know nothing of package testing;
// Uncontended, Contended and the Report methods are their *testing.B
// wrappers, and Stats turns a run into the figures a report prints.
package benchwork

import (
	"context"
	"strconv"

	"github.com/dlockdev/dlock"
)

// Cycle is one uncontended acquire+release of name.
type Cycle func(ctx context.Context, name string) error

// Lock takes the contended lock for worker, waiting as long as it must,
// and returns the function that releases it.
type Lock func(ctx context.Context, worker int) (release func(context.Context) error, err error)

// Name is worker's lock name in a run whose names start with prefix.
func Name(prefix string, worker int) string { return prefix + strconv.Itoa(worker) }

// AcquireRelease is a Cycle that acquires name on l with opts and
// releases it at once.
func AcquireRelease(l *dlock.Locker, opts ...dlock.Option) Cycle {
	return func(ctx context.Context, name string) error {
		ls, err := l.Acquire(ctx, name, opts...)
		if err != nil {
			return err
		}
		return ls.Release(ctx)
	}
}

// TryAcquireRelease is a Cycle that makes one attempt on name with
// TryAcquire and releases the lease at once; a held name is a failure.
func TryAcquireRelease(l *dlock.Locker, opts ...dlock.Option) Cycle {
	return func(ctx context.Context, name string) error {
		ls, err := l.TryAcquire(ctx, name, opts...)
		if err != nil {
			return err
		}
		return ls.Release(context.WithoutCancel(ctx))
	}
}

// Acquire is a Lock on name that worker i takes with lockers[i] and opts.
func Acquire(lockers []*dlock.Locker, name string, opts ...dlock.Option) Lock {
	return leaseLock(func(ctx context.Context, worker int) (*dlock.Lease, error) {
		return lockers[worker].Acquire(ctx, name, opts...)
	})
}

// AcquirePermit is a Lock that worker i takes as a permit of sems[i],
// with opts; run it with Contend.Permits set to the permit count.
func AcquirePermit(sems []*dlock.Semaphore, opts ...dlock.Option) Lock {
	return leaseLock(func(ctx context.Context, worker int) (*dlock.Lease, error) {
		return sems[worker].Acquire(ctx, opts...)
	})
}

// leaseLock is the Lock whose grant is the lease take returns.
func leaseLock(take func(ctx context.Context, worker int) (*dlock.Lease, error)) Lock {
	return func(ctx context.Context, worker int) (func(context.Context) error, error) {
		ls, err := take(ctx, worker)
		if err != nil {
			return nil, err
		}
		return ls.Release, nil
	}
}
