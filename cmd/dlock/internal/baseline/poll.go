package baseline

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/dlockdev/dlock/internal/benchwork"
)

// PollIntervals are the pauses between the attempts of the baseline's
// contended polls: 100 µs (what redislock's own raw benchmark sleeps) and
// 1 ms.
var PollIntervals = []time.Duration{100 * time.Microsecond, time.Millisecond}

// attempt makes one try at the lock: ok reports a grant, whose release
// it returns.
type attempt func(ctx context.Context) (release func(context.Context) error, ok bool, err error)

// attempts sets up one attempt per worker on the lock name (sessions,
// connections of its own where a user's processes would have them) and
// returns them with their teardown.
type attempts func(ctx context.Context, workers int, name string) ([]attempt, func(), error)

// shared is attempts where every worker tries with the same function,
// on the side's shared client.
func shared(mk func(name string) attempt) attempts {
	return func(_ context.Context, workers int, name string) ([]attempt, func(), error) {
		a := mk(name)
		as := make([]attempt, workers)
		for i := range as {
			as[i] = a
		}
		return as, func() {}, nil
	}
}

// polls are the ways a user waits for a lock by trying again: a short
// sleep between attempts (each of PollIntervals), and, for reference
// only, a busy loop that just yields between attempts (no user would
// spend a core per waiter, so it is never the baseline's best).
func polls(mk attempts) []Contender {
	var cs []Contender
	for _, d := range PollIntervals {
		cs = append(cs, Contender{Name: "poll every " + d.String(), Contend: pollWith(mk, d)})
	}
	return append(cs, Contender{Name: "busy poll", Extra: true, Contend: pollWith(mk, 0)})
}

// pollWith is a contended Lock that tries until granted, pausing every
// between attempts (0: yielding only).
func pollWith(mk attempts, every time.Duration) func(context.Context, int, string) (benchwork.Lock, func(), error) {
	return func(ctx context.Context, workers int, name string) (benchwork.Lock, func(), error) {
		as, teardown, err := mk(ctx, workers, name)
		if err != nil {
			return nil, nil, err
		}
		lock := func(ctx context.Context, w int) (func(context.Context) error, error) {
			for {
				release, ok, err := as[w](ctx)
				if err != nil {
					return nil, err
				}
				if ok {
					return release, nil
				}
				if err := pause(ctx, every); err != nil {
					return nil, err
				}
			}
		}
		return lock, teardown, nil
	}
}

// pause sleeps d, or yields when d is 0; it ends early with ctx.
func pause(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		runtime.Gosched()
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// cycleOf is the uncontended cycle of a baseline: one attempt at the
// name, which must succeed, then its release.
func cycleOf(mk func(name string) attempt) benchwork.Cycle {
	return func(ctx context.Context, name string) error {
		release, ok, err := mk(name)(ctx)
		if err != nil {
			return err
		}
		if !ok {
			return held(name)
		}
		return release(ctx)
	}
}

// held is the error of an uncontended cycle that found its own name held.
func held(what string) error { return fmt.Errorf("baseline: %s is held", what) }
