package dlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlockdev/dlock/driver"
)

// waiter is the package's one wait engine. Every call that waits goes
// through it: Acquire, TryAcquire and AcquireAll (a plain lock, and every
// key a primitive takes), Semaphore.Acquire, RWMutex.Lock and RLock,
// Election.Campaign, and Election.Observe between its looks.
//
// A wait alternates looks, which are its caller's (one attempt on a key;
// or a listing of a primitive's holders and attempts on the free keys),
// with waits, which are the engine's, chosen for the backend at hand:
//
//   - in the backend's own queue (driver.Queuer), which hands the lock
//     over in its order: a plain lock's attempts wait there themselves
//     (see attemptQueue); a primitive's wait that may take what it waits
//     for (a permit, a read slot) queues on every key in its way at once
//     when the backend queues but sends no release notifications
//     (see queue);
//   - else until a release notification (driver.Notifier) on a key in
//     the way: a key not yet watched is subscribed to first and the
//     caller looks again at once, so that a release in between is never
//     missed;
//   - else, and as the fallback, for a capped exponential backoff with
//     full jitter (WithBackoff) that never sleeps past the shortest TTL
//     in the way: expiry notifies nobody.
//
// The wait ends with a look's grant or final error, when the Locker is
// closed, or when ctx or the wait bound (WithWait) runs out: then with
// the error naming the holder last seen in the way (a *HeldError), or
// saying that the backend failed or never answered (see giveUp).
type waiter struct {
	l *Locker
	// name is the lock's or primitive's name, as errors show it.
	name  string
	s     settings
	start time.Time
	// cancel ends the wait's context (see waitFor).
	cancel context.CancelFunc
	// mayTake: the wait may take a key in its way (a permit, a read
	// slot) from the backend's queue (see queuer).
	mayTake bool
	subs    map[string]subscription
	// attempt counts the backoff sleeps so far: the backoff's exponent.
	attempt int
	// What the looks saw: the holder the backend last named (answered
	// is true once it named one), and the failure that stood in for an
	// answer on the last look.
	blame    Holder
	answered bool
	failed   error
	// token is the request of the attempts on one key (zero for a
	// primitive's wait): what they may have won unseen (a reply lost, an
	// attempt abandoned mid-flight) is released when the wait ends
	// without a grant.
	token driver.Request
}

// sight is what one look saw: a grant (lease), a final error (err), or
// the grants in the way (held).
type sight struct {
	lease *Lease
	err   error
	// held are the grants in the way: the wait watches or queues on
	// their keys and never sleeps past their TTLs.
	held []Holder
	// blame is the holder an error names if the wait ends now; answered
	// is true when the backend named it.
	blame    Holder
	answered bool
	// failed is the failure that stood in for an answer: the backend
	// failed, or did not answer before the wait's context ended.
	failed error
	// queued: the look waited in the backend's queue itself.
	queued bool
}

// blocked is the sight of a look that found held in the way; an error
// names blame if the wait ends now.
func blocked(blame Holder, held []Holder) sight {
	return sight{held: held, blame: blame, answered: true}
}

// newWaiter starts a wait for name (the name errors show) without a
// context of its own.
func (l *Locker) newWaiter(name string, s settings) waiter {
	return waiter{l: l, name: name, s: s, start: time.Now()}
}

// waitFor starts a wait for name under ctx and returns it with the
// context it runs under: ctx bounded by s.wait from now. close ends both.
func (l *Locker) waitFor(ctx context.Context, name string, s settings) (waiter, context.Context) {
	w := l.newWaiter(name, s)
	wctx, cancel := waitContext(ctx, w.start, s.wait)
	w.cancel = cancel
	return w, wctx
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

// remaining is the wait's settings with the wait reduced by the time
// since it began, for a grant taken on the way (a semaphore's queue
// place, an RWMutex's write key).
func (w *waiter) remaining() settings {
	s := w.s
	if s.wait != Forever && s.wait != 0 {
		s.wait = max(s.wait-time.Since(w.start), time.Nanosecond)
	}
	return s
}

// run looks (under wctx, the wait's context) until a look grants or
// fails, and waits between looks, as waiter's doc says; ctx is the
// caller's, whose end the error reports. got, passed to the next look, is
// a key in the way that the backend's queue handed over: the look keeps
// it or gives it back.
func (w *waiter) run(ctx, wctx context.Context, look func(ctx context.Context, got *Lease) sight) (*Lease, error) {
	var got *Lease
	for {
		sg := look(wctx, got)
		if sg.lease != nil || sg.err != nil {
			return sg.lease, sg.err
		}
		w.note(sg)
		if w.over(wctx, sg) {
			return nil, w.giveUp(ctx)
		}
		if err := w.l.usable(); err != nil { // closed while we waited
			if w.failed != nil {
				w.giveBack()
			}
			return nil, err
		}
		var err error
		if got, err = w.between(wctx, sg); err != nil {
			return nil, w.giveUp(ctx)
		}
	}
}

// note keeps what a look saw: the holder the backend named, or the
// failure that stood in for an answer.
func (w *waiter) note(sg sight) {
	w.failed = sg.failed
	if sg.answered {
		w.blame, w.answered = sg.blame, true
	}
}

// over reports whether the wait ends after sg: a single attempt, the
// end of the wait's context, a failure that retrying cannot cure
// (driver.ErrPermanent), or a queue that let go without a grant or a
// failure: it waited as long as it could.
func (w *waiter) over(wctx context.Context, sg sight) bool {
	return w.s.wait == 0 || wctx.Err() != nil || errors.Is(sg.failed, driver.ErrPermanent) || (sg.queued && sg.failed == nil)
}

// giveUp ends a wait that got nothing: it gives back what an attempt may
// have won unseen, and returns the error. Only a positive answer from the
// backend ("held by X") becomes a *HeldError: a failed attempt, or a wait
// that ended before the backend ever answered, is an error matching
// ErrBackend (and the context's error), never a conflict — a caller that
// skips its work on ErrNotAcquired must not skip it silently for as long
// as an outage lasts.
func (w *waiter) giveUp(ctx context.Context) error {
	if w.failed != nil || ctx.Err() != nil {
		w.giveBack()
	}
	waited := time.Since(w.start)
	switch {
	case w.failed != nil && !isCtxErr(w.failed):
		return backend("acquire", w.name, w.failed)
	case !w.answered:
		return unanswered(w.name, waited, w.failed, ctx)
	}
	return heldError(ctx, w.name, w.blame, waited)
}

// giveBack releases, in the background, whatever the attempts on the
// wait's token may have won unseen.
func (w *waiter) giveBack() {
	if w.token.Token != "" {
		w.l.cleanup(w.token)
	}
}

// heldBy is the error of a wait that ends with h in its way.
func (w *waiter) heldBy(ctx context.Context, h Holder) error {
	return heldError(ctx, w.name, h, time.Since(w.start))
}

// heldError is a *HeldError naming h as the holder of name, joined with
// ctx's error when ctx ended the wait.
func heldError(ctx context.Context, name string, h Holder, waited time.Duration) error {
	held := &HeldError{Holder: h, Waited: waited}
	held.Name = name
	if err := ctx.Err(); err != nil {
		return errors.Join(held, err)
	}
	return held
}

// unanswered is the error of a wait that ended (deadline, wait bound or
// cancellation) before the backend answered at all.
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

// between waits between two looks, as sg calls for (see waiter). A key
// in the way that the backend's queue granted is handed over as got.
func (w *waiter) between(wctx context.Context, sg sight) (got *Lease, err error) {
	if sg.failed != nil { // no answer to wait on: back off, woken by what is watched
		return nil, w.sleep(wctx, -1)
	}
	if q := w.queuer(sg.held); q != nil {
		if got, err = w.queue(wctx, q, sg.held); got != nil || err != nil {
			return got, err
		}
		return nil, w.sleep(wctx, -1) // a queue failed: look again after the backoff
	}
	return nil, w.pause(wctx, sg.held)
}

// reset ends every subscription and restarts the backoff, for a new wait
// of the same call (a reader entering again).
func (w *waiter) reset() {
	for _, s := range w.subs {
		s.stop()
	}
	clear(w.subs)
	w.attempt = 0
}

// again restarts the backoff: something changed, so look again soon.
func (w *waiter) again() { w.attempt = 0 }

// close ends the wait: its subscriptions and its context.
func (w *waiter) close() {
	w.reset()
	if w.cancel != nil {
		w.cancel()
	}
}
