package dlock

import (
	"context"
	"math/rand/v2"
	"reflect"
	"time"

	"github.com/dlockdev/dlock/driver"
)

// This file holds how a wait sleeps between looks when it does not
// queue: until a release notification, or for the backoff.

// subscription is one watched key's release notifications.
type subscription struct {
	ch   <-chan struct{}
	stop func()
}

// pause waits until one of held may have been released: a notification
// on a watched key, the backoff (never past the shortest of held's TTLs),
// or ctx's end. A key of held not yet watched is subscribed to first and
// pause returns at once, so that the caller looks again with the
// subscription in place and a release in between is never missed.
func (w *waiter) pause(ctx context.Context, held []Holder) error {
	if w.watch(ctx, held) {
		return nil
	}
	return w.sleep(ctx, shortestTTL(held))
}

// watch subscribes to the release notifications of held's keys not yet
// watched, where the backend sends them; fresh is true when it did.
func (w *waiter) watch(ctx context.Context, held []Holder) (fresh bool) {
	n, ok := w.l.drv.(driver.Notifier)
	if !ok {
		return false
	}
	for _, h := range held {
		k := h.backendKey()
		if _, ok := w.subs[k]; ok {
			continue
		}
		if ch, stop, err := n.Watch(ctx, k); err == nil {
			if w.subs == nil {
				w.subs = map[string]subscription{}
			}
			w.subs[k] = subscription{ch, stop}
			fresh = true
		}
	}
	return fresh
}

// shortestTTL is the shortest known TTL in held; negative: none known.
func shortestTTL(held []Holder) time.Duration {
	shortest := time.Duration(-1)
	for _, h := range held {
		if h.TTL >= 0 && (shortest < 0 || h.TTL < shortest) {
			shortest = h.TTL
		}
	}
	return shortest
}

// sleep waits for a notification on a watched key, the backoff (never
// past ttl, when not negative), or ctx's end. A subscription the driver
// ended (its channel closed) is not renewed for the rest of the wait: its
// key is polled for with the backoff, rather than the closed channel
// taken for a release again and again.
func (w *waiter) sleep(ctx context.Context, ttl time.Duration) error {
	t := time.NewTimer(w.backoff(ttl))
	defer t.Stop()
	ended, err := w.wake(ctx, t.C)
	if err != nil {
		return err
	}
	if s, ok := w.subs[ended]; ok {
		s.stop()
		w.subs[ended] = subscription{stop: func() {}} // a nil channel: polled from now on
	}
	w.attempt++
	return nil
}

// wake returns at ctx's end (with its error), when timer fires, or on a
// notification from a watched key; ended names the key whose channel the
// driver closed, if that is what woke it. One subscription, the common
// case, is selected on directly; more through reflect.Select.
func (w *waiter) wake(ctx context.Context, timer <-chan time.Time) (ended string, err error) {
	if len(w.subs) > 1 {
		return w.wakeAny(ctx, timer)
	}
	var key string
	var ch <-chan struct{} // nil, never ready, without a subscription
	for k, s := range w.subs {
		key, ch = k, s.ch
	}
	select {
	case <-ctx.Done():
		return "", ctx.Err()
	case <-timer:
	case _, open := <-ch:
		if !open {
			return key, nil
		}
	}
	return "", nil
}

// wakeAny is wake for several subscriptions.
func (w *waiter) wakeAny(ctx context.Context, timer <-chan time.Time) (ended string, err error) {
	cases := []reflect.SelectCase{
		{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())},
		{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(timer)},
	}
	keys := []string{"", ""}
	for k, s := range w.subs {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(s.ch)})
		keys = append(keys, k)
	}
	chosen, _, open := reflect.Select(cases)
	switch {
	case chosen == 0:
		return "", ctx.Err()
	case chosen >= 2 && !open:
		return keys[chosen], nil
	}
	return "", nil
}

// backoff is capped exponential with full jitter, and never longer than
// ttl, the shortest TTL in the way (negative: none known), plus 1 ms.
func (w *waiter) backoff(ttl time.Duration) time.Duration {
	ceil := w.s.backoffMin << min(w.attempt, 20)
	if ceil > w.s.backoffMax || ceil <= 0 {
		ceil = w.s.backoffMax
	}
	d := rand.N(ceil) + 1
	if ttl >= 0 && ttl+time.Millisecond < d {
		d = ttl + time.Millisecond
	}
	return d
}
