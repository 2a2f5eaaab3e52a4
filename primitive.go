package dlock

import (
	"context"
	"errors"
	"math/rand/v2"
	"reflect"
	"time"

	"github.com/dlockdev/dlock/driver"
)

// releaseWait is a primitive's wait for one of several held keys to be
// released: woken by the backend's release notifications where it sends
// them (driver.Notifier); where it only queues (driver.Queuer) and the
// waiter may take what it waits for, by queueing on every key at once
// (queueFor); else by capped, jittered backoff that never sleeps past the
// shortest holder's remaining TTL (expiry notifies nobody).
type releaseWait struct {
	l       *Locker
	s       settings
	queue   bool // the waiter may take a held key (a permit, a read slot)
	subs    map[string]subscription
	attempt int
}

type subscription struct {
	ch   <-chan struct{}
	stop func()
}

// newReleaseWait returns a wait that may take what it waits for when
// queue is true (see next).
func newReleaseWait(l *Locker, s settings, queue bool) *releaseWait {
	return &releaseWait{l: l, s: s, queue: queue, subs: map[string]subscription{}}
}

// next returns when one of held may have been released, after the
// backoff, or with ctx's error. On a backend that queues but does not
// notify, a wait that may take keys comes back holding one of held's keys
// as a live lease, which the caller keeps or releases.
func (w *releaseWait) next(ctx context.Context, held []Holder) (*Lease, error) {
	if _, notifies := w.l.drv.(driver.Notifier); !notifies && w.queue && len(held) > 0 {
		if q, ok := w.l.drv.(driver.Queuer); ok {
			ls, err := w.queueFor(ctx, q, held)
			if ls != nil || err != nil {
				return ls, err
			}
			return nil, w.sleep(ctx, -1) // a queue failed: look again after the backoff
		}
	}
	return nil, w.wait(ctx, held)
}

// wait returns when one of held may have been released, after the
// backoff, or with ctx's error. A key not yet watched is subscribed to
// first and wait returns at once, so that the caller looks again with the
// subscription in place and a release in between is never missed.
func (w *releaseWait) wait(ctx context.Context, held []Holder) error {
	n, notifies := w.l.drv.(driver.Notifier)
	fresh := false
	shortest := time.Duration(-1)
	for _, h := range held {
		if h.TTL >= 0 && (shortest < 0 || h.TTL < shortest) {
			shortest = h.TTL
		}
		k := h.backendKey()
		if _, ok := w.subs[k]; ok || !notifies {
			continue
		}
		if ch, stop, err := n.Watch(ctx, k); err == nil {
			w.subs[k] = subscription{ch, stop}
			fresh = true
		}
	}
	if fresh {
		return nil
	}
	return w.sleep(ctx, shortest)
}

// sleep waits for a notification on a watched key, the backoff (never past
// shortest, when not negative), or ctx's end.
func (w *releaseWait) sleep(ctx context.Context, shortest time.Duration) error {
	t := time.NewTimer(w.backoff(shortest))
	defer t.Stop()
	cases := []reflect.SelectCase{
		{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())},
		{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(t.C)},
	}
	keys := []string{"", ""}
	for k, s := range w.subs {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(s.ch)})
		keys = append(keys, k)
	}
	chosen, _, open := reflect.Select(cases)
	switch {
	case chosen == 0:
		return ctx.Err()
	case chosen >= 2 && !open: // a subscription the driver ended: poll for it
		w.subs[keys[chosen]].stop()
		delete(w.subs, keys[chosen])
	}
	w.attempt++
	return nil
}

// backoff is the polling fallback: capped exponential with full jitter,
// never past the shortest known TTL (negative: none known).
func (w *releaseWait) backoff(shortest time.Duration) time.Duration {
	ceil := w.s.backoffMin << min(w.attempt, 20)
	if ceil > w.s.backoffMax || ceil <= 0 {
		ceil = w.s.backoffMax
	}
	d := rand.N(ceil) + 1
	if shortest >= 0 && shortest+time.Millisecond < d {
		d = shortest + time.Millisecond
	}
	return d
}

// stop ends every subscription.
func (w *releaseWait) stop() {
	for _, s := range w.subs {
		s.stop()
	}
	clear(w.subs)
}

// heldBy is the error of a primitive's acquire that ran out of wait while
// holders stood in its way.
func heldBy(ctx context.Context, name string, h Holder, waited time.Duration) error {
	held := &HeldError{Holder: h, Waited: waited}
	held.Name = name
	if err := ctx.Err(); err != nil {
		return errors.Join(held, err)
	}
	return held
}
