package baseline

import (
	"context"
	"fmt"
	"math/rand/v2"
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

// BackoffMin and BackoffMax bound the baseline's backoff poll: the pause
// doubles from BackoffMin to BackoffMax, each drawn uniformly below it
// (full jitter), so that waiters spread out.
const (
	BackoffMin = time.Millisecond
	BackoffMax = 16 * time.Millisecond
)

// backoffPoll is the way of waiting a user writes to spare the server:
// try, then pause longer after each refused attempt (BackoffMin to
// BackoffMax, full jitter).
func backoffPoll(mk attempts) Contender {
	name := fmt.Sprintf("poll with backoff %s→%s", BackoffMin, BackoffMax)
	return Contender{Name: name, Contend: func(ctx context.Context, workers int, lockName string) (benchwork.Lock, func(), error) {
		as, teardown, err := mk(ctx, workers, lockName)
		if err != nil {
			return nil, nil, err
		}
		lock := func(ctx context.Context, w int) (func(context.Context) error, error) {
			for d := BackoffMin; ; d = min(2*d, BackoffMax) {
				release, ok, err := as[w](ctx)
				if err != nil || ok {
					return release, err
				}
				if err := pause(ctx, rand.N(d)+1); err != nil {
					return nil, err
				}
			}
		}
		return lock, teardown, nil
	}}
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

// tokenLock is a lock kept as a row with a token: try takes name for tok
// when it is free, drop frees it if tok still holds it.
type tokenLock interface {
	try(ctx context.Context, name, tok string) (bool, error)
	drop(ctx context.Context, name, tok string) error
}

// tokenAttempts makes l's attempts: one try at the baseline's key for the
// name with a fresh token, released by that token.
func tokenAttempts(l tokenLock) func(name string) attempt {
	return func(name string) attempt {
		key := keyFor(name)
		return func(ctx context.Context) (func(context.Context) error, bool, error) {
			tok := newToken()
			ok, err := l.try(ctx, key, tok)
			if err != nil || !ok {
				return nil, false, err
			}
			return func(ctx context.Context) error { return l.drop(ctx, key, tok) }, true, nil
		}
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
