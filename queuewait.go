package dlock

import (
	"context"
	"sync"
	"time"

	"github.com/dlockdev/dlock/driver"
)

// queueFor waits for one of held's keys by queueing on every one of them
// at once in the backend's own queue (driver.Queuer): the waiter is woken
// by the release itself, in the backend's order, on backends that queue
// but do not broadcast releases (Postgres, and etcd or ZooKeeper without
// a Notifier). The first grant is returned as a live lease; every other
// queue place is left, and any other grant released, before queueFor
// returns, so that nothing it started outlives the call. With a nil lease
// and a nil error, a queue failed and the caller looks again.
func (w *releaseWait) queueFor(ctx context.Context, q driver.Queuer, held []Holder) (*Lease, error) {
	qctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type won struct {
		req  driver.Request
		g    driver.Grant
		sent time.Time
	}
	results := make(chan won, len(held))
	var wg sync.WaitGroup
	for _, h := range held {
		req := driver.Request{Name: h.backendKey(), Token: newToken(), Owner: w.s.owner, TTL: w.s.ttl}
		wg.Go(func() {
			sent := w.l.clock.Now()
			g, err := q.AcquireWait(qctx, req)
			if err != nil || !g.Acquired {
				w.l.cleanup(req) // an attempt may have been applied unseen
				results <- won{}
				return
			}
			if !g.Since.IsZero() {
				sent = onClock(w.l.clock, g.Since)
			}
			results <- won{req, g, sent}
		})
	}
	var first won
	select {
	case first = <-results:
	case <-ctx.Done():
	}
	cancel()
	wg.Wait()
	close(results)
	for r := range results { // grants that raced the first: give them back
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
