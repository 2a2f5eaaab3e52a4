package redlock

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// subCmdTimeout bounds one SUBSCRIBE or UNSUBSCRIBE on a node.
const subCmdTimeout = 5 * time.Second

// nodeSub is the one subscription connection to one node. Watchers of a
// channel share its subscription; (un)subscribe commands go out in order
// from one goroutine, so a quick unsubscribe/subscribe pair cannot be
// reordered, and Redis's confirmations come back in the order sent.
type nodeSub struct {
	hub *hub
	ps  *redis.PubSub

	mu      sync.Mutex
	watch   map[string]map[chan struct{}]struct{}
	current map[string]chan struct{}   // closed once the live subscription is confirmed
	expect  map[string][]chan struct{} // confirmations awaited, in order sent
	queue   []subCmd

	kick chan struct{}
	stop chan struct{}
	wg   sync.WaitGroup
}

type subCmd struct {
	channel string
	sub     bool
	confirm chan struct{}
}

func newNodeSub(h *hub, c redis.UniversalClient) *nodeSub {
	ns := &nodeSub{
		hub: h, ps: c.Subscribe(context.Background()),
		watch:   map[string]map[chan struct{}]struct{}{},
		current: map[string]chan struct{}{},
		expect:  map[string][]chan struct{}{},
		kick:    make(chan struct{}, 1),
		stop:    make(chan struct{}),
	}
	msgs := ns.ps.ChannelWithSubscriptions(redis.WithChannelSize(256))
	ns.wg.Add(2)
	go ns.send()
	go ns.dispatch(msgs)
	return ns
}

// add registers w for channel and returns a channel closed once the
// channel's subscription on this node is confirmed.
func (ns *nodeSub) add(channel string, w chan struct{}) <-chan struct{} {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	set := ns.watch[channel]
	if set == nil {
		set = map[chan struct{}]struct{}{}
		ns.watch[channel] = set
		conf := make(chan struct{})
		ns.current[channel] = conf
		ns.expect[channel] = append(ns.expect[channel], conf)
		ns.enqueue(subCmd{channel: channel, sub: true, confirm: conf})
	}
	set[w] = struct{}{}
	return ns.current[channel]
}

// remove unregisters w, unsubscribing when it was the last watcher.
func (ns *nodeSub) remove(channel string, w chan struct{}) {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	set := ns.watch[channel]
	delete(set, w)
	if set != nil && len(set) == 0 {
		delete(ns.watch, channel)
		delete(ns.current, channel)
		ns.enqueue(subCmd{channel: channel})
	}
}

func (ns *nodeSub) enqueue(c subCmd) {
	ns.queue = append(ns.queue, c)
	select {
	case ns.kick <- struct{}{}:
	default:
	}
}

// send issues the queued commands in order.
func (ns *nodeSub) send() {
	defer ns.wg.Done()
	for {
		select {
		case <-ns.kick:
		case <-ns.stop:
			return
		}
		for c, ok := ns.pop(); ok; c, ok = ns.pop() {
			ns.exec(c)
		}
	}
}

func (ns *nodeSub) pop() (subCmd, bool) {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	if len(ns.queue) == 0 {
		return subCmd{}, false
	}
	c := ns.queue[0]
	ns.queue = ns.queue[1:]
	return c, true
}

func (ns *nodeSub) exec(c subCmd) {
	ctx, cancel := context.WithTimeout(context.Background(), subCmdTimeout)
	defer cancel()
	if !c.sub {
		_ = ns.ps.Unsubscribe(ctx, c.channel)
		return
	}
	if err := ns.ps.Subscribe(ctx, c.channel); err != nil {
		ns.forget(c.channel, c.confirm)
	}
}

// forget drops a confirmation that will not come (the command failed).
func (ns *nodeSub) forget(channel string, conf chan struct{}) {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	q := ns.expect[channel]
	for i, c := range q {
		if c == conf {
			ns.expect[channel] = append(q[:i:i], q[i+1:]...)
			break
		}
	}
	if len(ns.expect[channel]) == 0 {
		delete(ns.expect, channel)
	}
}

// dispatch routes confirmations and release messages until the
// subscription is closed.
func (ns *nodeSub) dispatch(msgs <-chan any) {
	defer ns.wg.Done()
	for m := range msgs {
		switch m := m.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				ns.confirmed(m.Channel)
			}
		case *redis.Message:
			ns.hub.deliver(ns, m.Channel, m.Payload)
		}
	}
}

// confirmed closes the oldest awaited confirmation of channel. One that
// nobody awaited is a resubscription after a reconnect: a release may
// have been missed meanwhile, so the watchers are woken to look.
func (ns *nodeSub) confirmed(channel string) {
	ns.mu.Lock()
	q := ns.expect[channel]
	if len(q) > 0 {
		close(q[0])
		ns.expect[channel] = q[1:]
		if len(q) == 1 {
			delete(ns.expect, channel)
		}
		ns.mu.Unlock()
		return
	}
	ns.mu.Unlock()
	for _, w := range ns.watchers(channel) {
		signal(w)
	}
}

// signal wakes one watcher; a wake already pending absorbs it.
func signal(w chan struct{}) {
	select {
	case w <- struct{}{}:
	default:
	}
}

func (ns *nodeSub) close() {
	close(ns.stop)
	_ = ns.ps.Close()
	ns.wg.Wait()
}

// watchers lists the watchers of channel.
func (ns *nodeSub) watchers(channel string) []chan struct{} {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	ws := make([]chan struct{}, 0, len(ns.watch[channel]))
	for w := range ns.watch[channel] {
		ws = append(ws, w)
	}
	return ws
}
