package dlock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/dlockdev/dlock/driver"
)

func (l *Locker) acquire(ctx context.Context, name string, s settings) (*Lease, error) {
	req := driver.Request{Name: name, Token: newToken(), Owner: s.owner, TTL: s.ttl}
	start := time.Now()
	wctx, cancel := waitContext(ctx, start, s.wait)
	defer cancel()
	if q, ok := l.drv.(driver.Queuer); ok && s.wait > 0 {
		return l.acquireQueued(ctx, wctx, q, req, s, start)
	}
	w := waiter{locker: l, name: name, s: s}
	defer w.stop()
	for attempt := 0; ; attempt++ {
		sent := l.clock.Now()
		g, err := l.drv.TryAcquire(wctx, req)
		if err == nil && g.Acquired {
			if since := onClock(l.clock, g.Since); !g.Since.IsZero() && since.Before(sent) {
				sent = since // the grant rides on an older renewal (a shared lease)
			}
			return l.granted(req, g, sent, s)
		}
		w.record(g, err)
		if s.wait == 0 || wctx.Err() != nil || errors.Is(err, driver.ErrPermanent) {
			return nil, l.notAcquired(ctx, req, w, start)
		}
		if err := l.usable(); err != nil { // closed while we waited
			if w.lastErr != nil {
				l.cleanup(req)
			}
			return nil, err
		}
		if err := w.pause(wctx, attempt); err != nil {
			return nil, l.notAcquired(ctx, req, w, start)
		}
	}
}

// waitContext bounds ctx by the wait; Forever adds no bound. A single
// attempt (wait 0) runs on ctx itself: a derived context would make
// every client library watch it (pgx registers a context.AfterFunc per
// statement; a client that does not honour deadlines needs a goroutine
// per call to bound it) even when ctx can never end.
func waitContext(ctx context.Context, start time.Time, wait time.Duration) (context.Context, context.CancelFunc) {
	if wait == 0 {
		return ctx, func() {}
	}
	if wait == Forever {
		return context.WithCancel(ctx)
	}
	return context.WithDeadline(ctx, start.Add(wait))
}

// notAcquired releases whatever the call may have won (an attempt may have
// been applied although its reply was lost) and builds the error. Only a
// positive answer from the backend ("held by X") becomes a *HeldError: a
// failed attempt, or a wait that ended before the backend ever answered,
// is an error matching ErrBackend (and the context's error), never a
// conflict — a caller that skips its work on ErrNotAcquired must not skip
// it silently for as long as an outage lasts.
func (l *Locker) notAcquired(ctx context.Context, req driver.Request, w waiter, start time.Time) error {
	if w.lastErr != nil || ctx.Err() != nil {
		l.cleanup(req)
	}
	waited := time.Since(start)
	switch {
	case w.lastErr != nil && !isCtxErr(w.lastErr):
		return backend("acquire", parseKey(req.Name).name, w.lastErr)
	case !w.heldSeen:
		return unanswered(parseKey(req.Name).name, waited, w.lastErr, ctx)
	}
	held := &HeldError{Holder: holderFrom(w.held), Waited: waited}
	ki := parseKey(req.Name) // the grant's kind is the key's, whatever the driver filled in
	held.Name, held.Kind, held.Permits, held.Slot = ki.name, ki.kind, ki.permits, ki.slot
	if err := ctx.Err(); err != nil {
		return errors.Join(held, err)
	}
	return held
}

// unanswered is the error of an acquire that ended (deadline, wait bound
// or cancellation) before the backend answered at all.
func unanswered(name string, waited time.Duration, cause error, ctx context.Context) error {
	if cause == nil {
		cause = ctx.Err()
	}
	if cause == nil {
		cause = context.DeadlineExceeded // the wait bound ran out
	}
	if errors.Is(cause, context.Canceled) {
		return fmt.Errorf("dlock: acquire %q: canceled after %s before the backend answered: %w", name, waited.Round(time.Millisecond), cause)
	}
	return fmt.Errorf("dlock: acquire %q: no answer from the backend within %s: %w", name, waited.Round(time.Millisecond), &backendError{cause})
}

func isCtxErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

func (l *Locker) acquireQueued(ctx, wctx context.Context, q driver.Queuer, req driver.Request, s settings, start time.Time) (*Lease, error) {
	w := waiter{locker: l, name: req.Name, s: s}
	for attempt := 0; ; attempt++ {
		sent := l.clock.Now()
		g, err := q.AcquireWait(wctx, req)
		if !g.Since.IsZero() {
			sent = onClock(l.clock, g.Since) // the queue kept the lease alive while it waited
		}
		if err == nil && g.Acquired {
			return l.granted(req, g, sent, s)
		}
		// A queue that ended with the context reports the holder it
		// queued behind; with none, the backend never answered.
		if g.Holder != (driver.Holder{}) {
			w.held, w.heldSeen = g.Holder, true
		}
		w.lastErr = err
		if err != nil && isCtxErr(err) && wctx.Err() != nil {
			l.cleanup(req)
			return nil, l.notAcquired(ctx, req, w, start)
		}
		// A transport failure mid-wait (a server restart, a dropped
		// connection) is retried within the wait bound, as the polling
		// loop does; the driver has given up its place in the queue.
		if err == nil || wctx.Err() != nil || errors.Is(err, driver.ErrPermanent) || l.usable() != nil {
			return nil, l.notAcquired(ctx, req, w, start)
		}
		if w.sleep(wctx, attempt) != nil {
			return nil, l.notAcquired(ctx, req, w, start)
		}
	}
}

// sleep waits the backoff before attempt's retry, or until ctx is done.
func (w *waiter) sleep(ctx context.Context, attempt int) error {
	t := time.NewTimer(w.backoff(attempt))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// waiter holds the state of one waiting Acquire: the subscription to
// release notifications, the last holder seen, the last backend error.
type waiter struct {
	locker  *Locker
	name    string
	s       settings
	notify  <-chan struct{}
	unwatch func()
	held    driver.Holder
	// heldSeen is true once the backend positively answered "held".
	heldSeen bool
	lastErr  error
}

// record keeps the outcome of one failed attempt: a holder the backend
// named, or the error that stood in for an answer.
func (w *waiter) record(g driver.Grant, err error) {
	if err != nil {
		w.lastErr = err
		return
	}
	w.held, w.heldSeen, w.lastErr = g.Holder, true, nil
}

// pause waits before the next attempt: for a release notification, the
// backoff timer, or the end of the wait. The first pause only subscribes,
// so that the next attempt happens with the subscription in place.
func (w *waiter) pause(ctx context.Context, attempt int) error {
	if w.unwatch == nil {
		if n, ok := w.locker.drv.(driver.Notifier); ok && w.lastErr == nil {
			ch, stop, err := n.Watch(ctx, w.name)
			if err == nil {
				w.notify, w.unwatch = ch, stop
				return nil
			}
		}
	}
	t := time.NewTimer(w.backoff(attempt))
	defer t.Stop()
	select {
	case <-w.notify:
		return nil
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// backoff is capped exponential with full jitter, and never longer than
// the holder's remaining TTL (expiry sends no notification).
func (w *waiter) backoff(attempt int) time.Duration {
	ceil := w.s.backoffMin << min(attempt, 20)
	if ceil > w.s.backoffMax || ceil <= 0 {
		ceil = w.s.backoffMax
	}
	d := rand.N(ceil) + 1
	if w.lastErr == nil && w.held.TTL >= 0 && w.held.TTL+time.Millisecond < d {
		d = w.held.TTL + time.Millisecond
	}
	return d
}

func (w *waiter) stop() {
	if w.unwatch != nil {
		w.unwatch()
	}
}
