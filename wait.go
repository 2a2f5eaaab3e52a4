package dlock

import (
	"context"
	cryptorand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/dlockdev/dlock/driver"
)

// Acquire takes the named lock, waiting while it is held: until it is
// granted, ctx is done, or the wait bound (WithWait, default DefaultWait)
// runs out. A lock that stays held yields an error matching ErrNotAcquired
// (errors.As gives a *HeldError naming the holder); a canceled ctx yields
// one that matches both ErrNotAcquired and ctx's error.
//
// Only a backend's positive answer that someone else holds the lock
// becomes ErrNotAcquired. A backend that fails, or does not answer before
// ctx or the wait bound ends, yields an error matching ErrBackend (and
// ctx's error) instead, so an outage never reads as "held". An error that
// retrying cannot cure (driver.ErrPermanent: missing schema, failed
// authentication) ends the wait at once. The call returns by ctx's
// deadline: whatever an abandoned attempt may have won is released in
// the background.
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
	ctx, t := l.traceAcquire(ctx, name, KindMutex, s)
	ls, err := l.acquire(ctx, name, s)
	return t.done(ls, err)
}

// TryAcquire makes exactly one attempt to take the named lock. When it is
// held the error matches ErrNotAcquired and carries a *HeldError.
func (l *Locker) TryAcquire(ctx context.Context, name string, opts ...Option) (*Lease, error) {
	s, err := l.settingsFor(name, opts)
	if err != nil {
		return nil, err
	}
	s.wait = 0
	ctx, t := l.traceAcquire(ctx, name, KindMutex, s)
	ls, err := l.acquire(ctx, name, s)
	return t.done(ls, err)
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

// granted turns a confirmed grant into a live lease.
func (l *Locker) granted(req driver.Request, g driver.Grant, sent time.Time, s settings) (*Lease, error) {
	ls := newLease(l, req, g, sent, s.autoRefresh)
	if !l.track(ls) {
		l.cleanup(req)
		return nil, invalid("Locker is closed")
	}
	if sw, ok := l.drv.(driver.SessionWatcher); ok {
		sw.WatchSession(req.Token, func() { ls.lose(LostSession, errSessionGone) })
	}
	if !s.autoRefresh && ls.window < ls.ttl {
		return l.confirm(ls)
	}
	return ls, nil
}

// confirm extends a provisional grant (driver.Grant.Window) to its TTL
// before the acquire returns, for a lease no watchdog will refresh: its
// holder was promised the TTL. A grant that can no longer be extended is
// released and reported as the backend error it is.
func (l *Locker) confirm(ls *Lease) (*Lease, error) {
	ctx, cancel := context.WithTimeout(context.Background(), ls.Expires().Sub(l.clock.Now()))
	defer cancel()
	if err := ls.Refresh(ctx, ls.ttl); err != nil {
		_ = ls.Release(context.Background())
		return nil, backend("acquire", ls.Name(), fmt.Errorf("confirming a hand-off: %w", err))
	}
	return ls, nil
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

// newToken returns 128 bits from crypto/rand, hex-encoded. crypto/rand.Read
// never fails on supported platforms (it panics internally if the kernel
// cannot supply randomness), so there is no error path to get wrong.
func newToken() string {
	var b [16]byte
	_, _ = cryptorand.Read(b[:])
	return hex.EncodeToString(b[:])
}
