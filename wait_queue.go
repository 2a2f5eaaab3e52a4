package dlock

import (
	"context"
	"sync"
	"time"

	"github.com/dlockdev/dlock/driver"
)

// This file holds how a wait waits in the backend's own queue
// (driver.Queuer).

// attemptQueue is the backend's queue (driver.Queuer) when the attempts
// of a wait on one key wait in it themselves: on a backend that queues,
// for every wait longer than one attempt. Nil: attempts and waits
// alternate.
func (w *waiter) attemptQueue() driver.Queuer {
	if w.s.wait == 0 {
		return nil
	}
	q, _ := w.l.drv.(driver.Queuer)
	return q
}

// queuer is the backend's queue when the wait queues on held's keys
// itself: it may take what it waits for, and the backend queues but sends
// no release notifications (Postgres, and etcd or ZooKeeper without a
// Notifier).
func (w *waiter) queuer(held []Holder) driver.Queuer {
	if !w.mayTake || len(held) == 0 {
		return nil
	}
	if _, notifies := w.l.drv.(driver.Notifier); notifies {
		return nil
	}
	q, _ := w.l.drv.(driver.Queuer)
	return q
}

// queued is one attempt that waited in the backend's queue: its request,
// and the grant with the time its lease counts from (sent).
type queued struct {
	req  driver.Request
	g    driver.Grant
	sent time.Time
	err  error
}

// queueAttempt makes one attempt that waits in the backend's queue until
// granted or ctx ends.
func (l *Locker) queueAttempt(ctx context.Context, q driver.Queuer, req driver.Request) queued {
	sent := l.clock.Now()
	g, err := q.AcquireWait(ctx, req)
	if !g.Since.IsZero() {
		sent = onClock(l.clock, g.Since) // the queue kept the lease alive while it waited
	}
	return queued{req: req, g: g, sent: sent, err: err}
}

// queue waits for one of held's keys by queueing on every one of them
// at once in the backend's own queue: the waiter is woken by the release
// itself, in the backend's order. The first grant is returned as a live
// lease; every other queue place is left, and any other grant released,
// before queue returns, so that nothing it started outlives the call.
// With a nil lease and a nil error, a queue failed and the caller looks
// again.
func (w *waiter) queue(ctx context.Context, q driver.Queuer, held []Holder) (*Lease, error) {
	qctx, cancel := context.WithCancel(ctx)
	defer cancel()
	results := make(chan queued, len(held))
	var wg sync.WaitGroup
	l := w.l // not w: the goroutines must not make every waiter escape
	for _, h := range held {
		req := driver.Request{Name: h.backendKey(), Token: newToken(), Owner: w.s.owner, TTL: w.s.ttl}
		wg.Go(func() {
			r := l.queueAttempt(qctx, q, req)
			if r.err != nil || !r.g.Acquired {
				l.cleanup(req) // an attempt may have been applied unseen
				r = queued{}
			}
			results <- r
		})
	}
	var first queued
	select {
	case first = <-results:
	case <-ctx.Done():
	}
	cancel()
	wg.Wait()
	close(results)
	return w.settleQueue(ctx, first, results)
}

// settleQueue gives back the grants that raced the first (and the first
// too when ctx ended the wait) and makes the first a live lease.
func (w *waiter) settleQueue(ctx context.Context, first queued, rest <-chan queued) (*Lease, error) {
	for r := range rest {
		if r.g.Acquired {
			w.l.cleanup(r.req)
		}
	}
	if ctx.Err() != nil {
		if first.g.Acquired {
			w.l.cleanup(first.req)
		}
		return nil, ctx.Err()
	}
	if !first.g.Acquired {
		return nil, nil
	}
	return w.l.granted(first.req, first.g, first.sent, w.s)
}
