package redlock

import (
	"context"
	"errors"
	"sync"
	"time"
)

// subscribeTimeout bounds how long Watch waits for fewer than a majority
// of nodes to confirm a subscription before it settles for what it has,
// and for the first confirmation before it gives up (the waiter then polls
// at its backoff until its next pause subscribes again). It is generous: a
// late subscription loses nothing, since the waiter attempts again once
// Watch returns, while one given up costs a whole backoff. At 250 ms, on a
// loaded 2-core machine no node had confirmed in time, and a waiter with
// a 5 s backoff got a lock 10.2 s after its release.
const subscribeTimeout = 2 * time.Second

// errNoSubscription makes the portable layer poll instead of waiting.
var errNoSubscription = errors.New("redlock: no node confirmed the release subscription in time")

// Watch subscribes to name's release channel on every node. A release
// publishes on every node where it deleted the key, so one confirmed
// subscription is enough to hear it; Watch waits for a majority to
// confirm, or settles for at least one after a short bound.
func (d *redlock) Watch(ctx context.Context, name string) (<-chan struct{}, func(), error) {
	subs, err := d.hub.open()
	if err != nil {
		return nil, nil, err
	}
	w := make(chan struct{}, 1)
	c := layout.Channel(name)
	confirms := make([]<-chan struct{}, len(subs))
	for i, ns := range subs {
		confirms[i] = ns.add(c, w)
	}
	stop := sync.OnceFunc(func() {
		for _, ns := range subs {
			ns.remove(c, w)
		}
	})
	if !d.awaitConfirms(ctx, confirms) {
		stop()
		return nil, nil, errNoSubscription
	}
	return w, stop, nil
}

// awaitConfirms waits for a majority of confirmations, or for at least one
// once the bound has passed.
func (d *redlock) awaitConfirms(ctx context.Context, confirms []<-chan struct{}) bool {
	done := make(chan struct{})
	defer close(done)
	got := make(chan struct{}, len(confirms))
	for _, c := range confirms {
		go func() {
			select {
			case <-c:
				got <- struct{}{}
			case <-done:
			}
		}()
	}
	timer := time.NewTimer(max(d.cfg.nodeTimeout, subscribeTimeout))
	defer timer.Stop()
	n, late := 0, false
	for n < d.quorum && !(late && n > 0) {
		select {
		case <-got:
			n++
		case <-timer.C:
			if n == 0 {
				return false
			}
			late = true
		case <-ctx.Done():
			return false
		}
	}
	return true
}

// hub owns one subscription connection per node, shared by every waiter
// of the driver; it is opened on the first Watch.
type hub struct {
	d      *redlock
	mu     sync.Mutex
	subs   []*nodeSub
	closed bool
	last   map[string]string    // channel -> id of the last release delivered
	hot    map[string]time.Time // name -> when an attempt was last refused
}

func newHub(d *redlock) *hub {
	return &hub{d: d, last: map[string]string{}, hot: map[string]time.Time{}}
}

func (h *hub) open() ([]*nodeSub, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, errors.New("redlock: driver is closed")
	}
	if h.subs == nil {
		for _, n := range h.d.nodes {
			h.subs = append(h.subs, newNodeSub(h, n.client))
		}
	}
	return h.subs, nil
}

func (h *hub) close() {
	h.mu.Lock()
	h.closed = true
	subs := h.subs
	h.mu.Unlock()
	for _, ns := range subs {
		ns.close()
	}
}
