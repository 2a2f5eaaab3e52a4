package redislock

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// honoursDeadlines reports whether c returns by its context's deadline: a
// go-redis client does only with ContextTimeoutEnabled (without it a
// stalled read waits out ReadTimeout, and is retried).
func honoursDeadlines(c redis.UniversalClient) bool {
	switch c := c.(type) {
	case *redis.Client:
		return c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return c.Options().ContextTimeoutEnabled
	}
	return false
}

type result[T any] struct {
	v   T
	err error
}

// bounded runs fn and returns by ctx's deadline even on a client that
// does not honour it: fn then finishes in the background (within the
// client's own timeouts) and its outcome is dropped. An acquire dropped
// this way may have been applied; the portable layer releases the token
// of every abandoned attempt, and an attempt undoes itself once its reply
// comes (boundedAfter).
func bounded[T any](ctx context.Context, d *redisDriver, fn func() (T, error)) (T, error) {
	return boundedAfter(ctx, d, fn, nil)
}

// boundedAfter is bounded, and when its caller gave up on fn, calls after
// with fn's outcome once fn returns (or at once, with errClosing, if the
// driver closes first), tracked by d.bg. A cleanup that must follow what
// fn did goes there: one sent when the caller gave up can reach Redis
// before fn's own request (fn waits for a connection, or is descheduled
// before its write), and is then undone by it.
func boundedAfter[T any](ctx context.Context, d *redisDriver, fn func() (T, error), after func(T, error)) (T, error) {
	if d.honours || ctx.Done() == nil {
		return fn()
	}
	ch := make(chan result[T], 1)
	d.workers.run(func() {
		v, err := fn()
		ch <- result[T]{v, err}
	})
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
	}
	select {
	case r := <-ch: // fn answered as ctx ended: its answer stands
		return r.v, r.err
	default:
	}
	if after != nil {
		d.bg.Add(1)
		go func() {
			defer d.bg.Done()
			select {
			case r := <-ch:
				after(r.v, r.err)
			case <-d.closing:
				var zero T
				after(zero, errClosing)
			}
		}()
	}
	var zero T
	return zero, ctx.Err()
}

// errClosing is the outcome boundedAfter gives after when the driver
// closed before an abandoned call answered.
var errClosing = errors.New("redislock: the driver is closing")

// workerIdle is how long an idle worker of bounded waits for another call
// before it exits.
const workerIdle = 100 * time.Millisecond

// workers runs bounded's calls on goroutines that serve one call after
// another while calls keep coming. A goroutine per call costs its start
// and, the go-redis call path being deep, the growth of its stack: on a
// client without ContextTimeoutEnabled that was a large share of an
// uncontended cycle's client CPU. Idle workers exit after workerIdle, and
// at once when the driver closes (stop); a worker busy with a call that
// outlived its caller's deadline exits when that call returns.
type workers struct {
	jobs    chan func()
	quit    chan struct{}
	stopped sync.Once
	started atomic.Int64 // workers started so far, for the tests
}

func newWorkers() *workers { return &workers{jobs: make(chan func()), quit: make(chan struct{})} }

// run hands job to an idle worker, else starts one.
func (w *workers) run(job func()) {
	select {
	case w.jobs <- job:
	default:
		w.started.Add(1)
		go w.loop(job)
	}
}

func (w *workers) loop(job func()) {
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		job()
		job = nil
		idle.Reset(workerIdle)
		select {
		case job = <-w.jobs:
		case <-idle.C:
			return
		case <-w.quit:
			return
		}
	}
}

// stop makes idle workers exit now. It does not wait for a busy one: its
// call outlived its caller's deadline, and Close must not hang on it.
func (w *workers) stop() { w.stopped.Do(func() { close(w.quit) }) }
