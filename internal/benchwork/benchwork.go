// Package benchwork measures the two lock workloads that every backend's
// benchmarks share: uncontended acquire+release cycles, each goroutine on
// its own name, and contended handoffs of one name between workers. The
// workloads take callbacks, so one harness measures dlock Lockers and each
// backend's baseline (raw advisory locks, etcd's concurrency.Mutex, a
// hand-written Redis script, ...) alike.
package benchwork

import (
	"context"
	"slices"
	"strconv"
	"time"

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

// Acquire is a Lock on name that worker i takes with lockers[i] and opts.
func Acquire(lockers []*dlock.Locker, name string, opts ...dlock.Option) Lock {
	return func(ctx context.Context, worker int) (func(context.Context) error, error) {
		ls, err := lockers[worker].Acquire(ctx, name, opts...)
		if err != nil {
			return nil, err
		}
		return ls.Release, nil
	}
}

// pct is the p-th percentile of d (0 when d is empty).
func pct(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
