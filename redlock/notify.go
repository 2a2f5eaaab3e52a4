package redlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dlockdev/dlock/internal/recent"
	"github.com/dlockdev/dlock/internal/rediscore"
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
// confirm, or settles for at least one after a short bound. Every
// release (its first copy: hub.fresh) wakes every waiter of the name.
func (d *redlock) Watch(ctx context.Context, name string) (<-chan struct{}, func(), error) {
	w := rediscore.NewListener(0)
	c := layout.Channel(name)
	stop := sync.OnceFunc(func() {
		for _, m := range d.hub.muxes {
			m.Unwatch(c, w)
		}
	})
	confirms := make([]*rediscore.Confirm, len(d.hub.muxes))
	for i, m := range d.hub.muxes {
		conf, err := m.Watch(c, w)
		if err != nil {
			stop()
			return nil, nil, fmt.Errorf("redlock: %w", err)
		}
		confirms[i] = conf
	}
	if !d.awaitConfirms(ctx, confirms) {
		stop()
		return nil, nil, errNoSubscription
	}
	return w.C(), stop, nil
}

// awaitConfirms waits for a majority of confirmations, or for at least one
// once the bound has passed. A node whose SUBSCRIBE failed never counts.
func (d *redlock) awaitConfirms(ctx context.Context, confirms []*rediscore.Confirm) bool {
	done := make(chan struct{})
	defer close(done)
	got := make(chan struct{}, len(confirms))
	for _, c := range confirms {
		go func() {
			select {
			case <-c.Done():
				if c.Err() == nil {
					got <- struct{}{}
				}
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

// hub owns one pub/sub multiplexer per node (each opens its connection on
// the first Watch), shared by every waiter of the driver.
type hub struct {
	d     *redlock
	muxes []*rediscore.Mux // by node

	mu   sync.Mutex
	last map[string]release // channel -> the last release heard of

	hot *recent.Names // the names an attempt was refused on lately
}

func newHub(d *redlock) *hub {
	h := &hub{d: d, last: map[string]release{}, hot: recent.New(hotFor, maxRemembered)}
	for _, n := range d.nodes {
		h.muxes = append(h.muxes, rediscore.NewMux(n.client, h.fresh))
	}
	return h
}

// waiters lists the driver's waiters on name (every node has them all).
func (h *hub) waiters(name string) []*rediscore.Waiter {
	return h.muxes[0].Waiters(layout.Channel(name))
}

func (h *hub) close() {
	for _, m := range h.muxes {
		_ = m.Close()
	}
}
