package dlock

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/dlockdev/dlock/driver"
)

// cleanupTimeout bounds the best-effort release of whatever an abandoned
// attempt may have won.
const cleanupTimeout = 2 * time.Second

// Acquire takes the named lock, waiting while it is held: until it is
// granted, ctx is done, or the wait bound (WithWait, default DefaultWait)
// runs out. A lock that stays held yields an error matching ErrNotAcquired
// (errors.As gives a *HeldError naming the holder); a canceled ctx yields
// one that matches both ErrNotAcquired and ctx's error.
//
// ctx bounds the wait only, never the lease: the lease lives until
// Release, loss, or Locker.Close.
//
// Waiters are woken by the release itself on backends that notify
// (driver.Notifier) and queue fairly where the backend queues
// (driver.Queuer); otherwise, and as a fallback, they poll with capped
// exponential backoff and full jitter, never sleeping past the holder's
// remaining TTL. Every attempt of one call uses the same token, so an
// attempt whose reply was lost is recognised as a grant on the next one;
// an attempt abandoned mid-flight is released, best effort.
func (l *Locker) Acquire(ctx context.Context, name string, opts ...Option) (*Lease, error) {
	s, err := l.settingsFor(name, opts)
	if err != nil {
		return nil, err
	}
	return l.acquire(ctx, name, s)
}

// TryAcquire makes exactly one attempt to take the named lock. When it is
// held the error matches ErrNotAcquired and carries a *HeldError.
func (l *Locker) TryAcquire(ctx context.Context, name string, opts ...Option) (*Lease, error) {
	s, err := l.settingsFor(name, opts)
	if err != nil {
		return nil, err
	}
	s.wait = 0
	return l.acquire(ctx, name, s)
}

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
		sent := time.Now()
		g, err := l.drv.TryAcquire(wctx, req)
		if err == nil && g.Acquired {
			return l.granted(req, g, sent, s)
		}
		if err != nil {
			w.lastErr = err
		} else {
			w.held = g.Holder
			w.lastErr = nil
		}
		if s.wait == 0 || wctx.Err() != nil {
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

// waitContext bounds ctx by the wait; Forever adds no bound.
func waitContext(ctx context.Context, start time.Time, wait time.Duration) (context.Context, context.CancelFunc) {
	if wait == Forever || wait == 0 {
		return context.WithCancel(ctx)
	}
	return context.WithDeadline(ctx, start.Add(wait))
}

// granted turns a confirmed grant into a live lease.
func (l *Locker) granted(req driver.Request, g driver.Grant, sent time.Time, s settings) (*Lease, error) {
	ls := newLease(l, req, g, sent, s.autoRefresh)
	if !l.track(ls) {
		l.cleanup(req)
		return nil, invalid("Locker is closed")
	}
	return ls, nil
}

// notAcquired releases whatever the call may have won (an attempt may have
// been applied although its reply was lost) and builds the error.
func (l *Locker) notAcquired(ctx context.Context, req driver.Request, w waiter, start time.Time) error {
	if w.lastErr != nil || ctx.Err() != nil {
		l.cleanup(req)
	}
	waited := time.Since(start)
	if w.lastErr != nil && !isCtxErr(w.lastErr) {
		return backend("acquire", req.Name, w.lastErr)
	}
	held := &HeldError{Holder: holderFrom(w.held), Waited: waited}
	held.Name = req.Name
	if err := ctx.Err(); err != nil {
		return errors.Join(held, err)
	}
	return held
}

func isCtxErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// cleanup releases req's token, best effort, detached from any caller.
func (l *Locker) cleanup(req driver.Request) {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	_ = l.drv.Release(ctx, req.Name, req.Token)
}

func (l *Locker) acquireQueued(ctx, wctx context.Context, q driver.Queuer, req driver.Request, s settings, start time.Time) (*Lease, error) {
	sent := time.Now()
	g, err := q.AcquireWait(wctx, req)
	if !g.Since.IsZero() {
		sent = g.Since // the queue kept the lease alive while it waited
	}
	if err == nil && g.Acquired {
		return l.granted(req, g, sent, s)
	}
	w := waiter{held: g.Holder, lastErr: err}
	if err != nil && isCtxErr(err) && wctx.Err() != nil {
		w.lastErr = nil
		l.cleanup(req)
	}
	return nil, l.notAcquired(ctx, req, w, start)
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
	lastErr error
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
