package redislock

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/dlockdev/dlock/internal/rediscore"
	"github.com/redis/go-redis/v9"
)

// subscribeTimeout bounds how long Watch waits for Redis to confirm a
// SUBSCRIBE; past it the caller falls back to polling.
const subscribeTimeout = 5 * time.Second

var errNotifierClosed = errors.New("redislock: driver is closed")

// notifier multiplexes every waiter of one driver over ONE pub/sub
// connection: a channel is subscribed while at least one waiter watches
// it, and each release message wakes the waiters it concerns (see wake).
//
// SUBSCRIBE confirmations arrive in the order the commands were sent, so
// each channel keeps a FIFO of pending confirmations; after a reconnect,
// go-redis re-subscribes every channel and any confirmation for a channel
// means it is subscribed on the live connection.
type notifier struct {
	client redis.UniversalClient

	mu     sync.Mutex
	ps     *redis.PubSub
	subs   map[string]*subscription
	acks   map[string][]chan struct{}
	closed bool
	exited chan struct{} // closed when the reader goroutine returns
}

// subscription is one subscribed channel and its waiters, oldest first.
type subscription struct {
	waiters []waiter
	ready   chan struct{} // closed once Redis confirmed the SUBSCRIBE
}

func newNotifier(c redis.UniversalClient) *notifier {
	return &notifier{client: c, subs: map[string]*subscription{}, acks: map[string][]chan struct{}{}}
}

// Watch implements driver.Notifier for the channel of name. Once the
// subscription is in place it sets name's watched mark, without which a
// release with nobody queued publishes nothing (it saves the uncontended
// release a call); the waiter's own attempts that find the lock held keep
// the mark alive (rediscore.WatchedTTL).
func (d *redisDriver) Watch(ctx context.Context, name string) (<-chan struct{}, func(), error) {
	ch, stop, err := d.notify.watch(ctx, d.keys.Channel(name))
	if err != nil {
		return nil, nil, err
	}
	_, err = bounded(ctx, d, func() (struct{}, error) {
		return struct{}{}, d.client.Set(ctx, d.keys.Watched(name), "1", rediscore.WatchedTTL).Err()
	})
	if err != nil {
		stop()
		return nil, nil, rediscore.Classify(err)
	}
	return ch, stop, nil
}

// watchOwn subscribes a queued waiter to its own channel and hands it
// each message's payload (a hand-off, or its turn to try: "").
func (n *notifier) watchOwn(ctx context.Context, channel string) (<-chan string, func(), error) {
	w := waiter{ch: make(chan struct{}, 1), own: true, msgs: make(chan string, 1)}
	stop, err := n.add(ctx, channel, w)
	return w.msgs, stop, err
}

// watch subscribes a waiter that shares channel with others (wake says
// which one a message wakes).
func (n *notifier) watch(ctx context.Context, channel string) (<-chan struct{}, func(), error) {
	w := waiter{ch: make(chan struct{}, 1)}
	stop, err := n.add(ctx, channel, w)
	return w.ch, stop, err
}

// add joins w to channel and waits until Redis confirmed the subscription.
func (n *notifier) add(ctx context.Context, channel string, w waiter) (func(), error) {
	sub, err := n.join(ctx, channel, w)
	if err != nil {
		return nil, err
	}
	stop := sync.OnceFunc(func() { n.leave(channel, sub, w.ch) })
	ctx, cancel := context.WithTimeout(ctx, subscribeTimeout)
	defer cancel()
	select {
	case <-sub.ready:
		return stop, nil
	case <-ctx.Done():
		stop()
		return nil, ctx.Err()
	}
}

// join adds waiter w to channel, subscribing when it is the first.
func (n *notifier) join(ctx context.Context, channel string, w waiter) (*subscription, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, errNotifierClosed
	}
	sub := n.subs[channel]
	if sub == nil {
		sub = &subscription{ready: make(chan struct{})}
		if err := n.subscribe(ctx, channel, sub); err != nil {
			return nil, err
		}
		n.subs[channel] = sub
	}
	sub.waiters = append(sub.waiters, w)
	return sub, nil
}

// subscribe sends SUBSCRIBE, starting the shared connection on first use.
// n.mu is held.
func (n *notifier) subscribe(ctx context.Context, channel string, sub *subscription) error {
	n.acks[channel] = append(n.acks[channel], sub.ready)
	first := n.ps == nil
	if first {
		n.ps = n.client.Subscribe(ctx)
	}
	err := n.ps.Subscribe(ctx, channel)
	if first {
		n.exited = make(chan struct{})
		go n.read(n.ps.ChannelWithSubscriptions(redis.WithChannelSize(256)))
	}
	if err != nil {
		q := n.acks[channel]
		n.acks[channel] = q[:len(q)-1]
		_ = n.ps.Unsubscribe(context.WithoutCancel(ctx), channel)
	}
	return err
}

// leave removes waiter w, unsubscribing when it was the last.
func (n *notifier) leave(channel string, sub *subscription, w chan struct{}) {
	n.mu.Lock()
	defer n.mu.Unlock()
	sub.waiters = slices.DeleteFunc(sub.waiters, func(x waiter) bool { return x.ch == w })
	if len(sub.waiters) > 0 || n.subs[channel] != sub {
		return
	}
	delete(n.subs, channel)
	if !n.closed {
		ctx, cancel := context.WithTimeout(context.Background(), subscribeTimeout)
		defer cancel()
		_ = n.ps.Unsubscribe(ctx, channel)
	}
}

// read dispatches confirmations and release messages until the pub/sub
// connection is closed.
func (n *notifier) read(msgs <-chan any) {
	defer close(n.exited)
	for m := range msgs {
		switch m := m.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				n.confirmed(m.Channel)
			}
		case *redis.Message:
			n.wake(m.Channel, m.Payload)
		}
	}
}

func (n *notifier) confirmed(channel string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	q := n.acks[channel]
	if len(q) == 0 {
		return // a re-subscription after a reconnect
	}
	close(q[0])
	if len(q) == 1 {
		delete(n.acks, channel)
	} else {
		n.acks[channel] = q[1:]
	}
}

// waiter is one Watch: its signal channel, and whether the channel is its
// own (a queued waiter's) rather than shared by every waiter of the name.
type waiter struct {
	ch   chan struct{}
	own  bool
	msgs chan string // an own waiter's payloads (a queued waiter's, WatchEvictions), else nil
}

// deliver hands payload to an own waiter with msgs, replacing an unread
// older one; it reports false for waiters without msgs.
func (w waiter) deliver(payload string) bool {
	if w.msgs == nil {
		return false
	}
	for {
		select {
		case w.msgs <- payload:
			return true
		default:
		}
		select {
		case <-w.msgs:
		default:
		}
	}
}

// signal wakes w unless a wake-up is already pending; it reports whether
// it sent one.
func (w waiter) signal() bool {
	select {
	case w.ch <- struct{}{}:
		return true
	default:
		return false
	}
}

// wake handles one release message on channel. A waiter on its own
// channel is always woken. Of the waiters sharing a name's channel, only
// the oldest that has no wake-up pending is woken: one attempt per release
// and per Locker is enough, since only one can win, and the rest keep their
// backoff timers as a fallback. That turns a herd of N attempts per
// release into one per Locker.
func (n *notifier) wake(channel, payload string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	sub := n.subs[channel]
	if sub == nil {
		return
	}
	woke := false
	for _, w := range sub.waiters {
		switch {
		case w.own:
			if !w.deliver(payload) {
				w.signal()
			}
		case !woke:
			woke = w.signal()
		}
	}
}

// close ends the shared connection and waits for the reader to return.
func (n *notifier) close() error {
	n.mu.Lock()
	n.closed = true
	ps, exited := n.ps, n.exited
	n.mu.Unlock()
	if ps == nil {
		return nil
	}
	err := ps.Close()
	<-exited
	return err
}
