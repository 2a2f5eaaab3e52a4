package redlock

import (
	"context"
	"fmt"
	"time"

	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/internal/rediscore"
)

// releaseTimeout bounds a release on each node. It is longer than the
// node timeout: a release is not on anyone's critical path once a
// majority has answered, and a slow node should still drop the key.
const releaseTimeout = 2 * time.Second

// Refresh extends the lock on every node where token still holds it and
// succeeds when a majority confirmed in time. It never re-creates a key a
// node has lost (that would hide the loss): such a node drops out of the
// lease, which lives on as long as a majority is left. A majority saying
// the token holds nothing yields driver.ErrTakenOver or ErrExpired.
func (d *redlock) Refresh(ctx context.Context, name, token string, ttl time.Duration) error {
	start := time.Now()
	ms := ttl.Milliseconds()
	t := d.ask(ctx, min(d.cfg.nodeTimeout, ttl), 0, func(ctx context.Context, i int) (int64, error) {
		return rediscore.Refresh.Run(ctx, d.nodes[i].client, []string{layout.Lock(name)}, anyAttempt(token), ms).Int64()
	})
	if err := t.outcome("refresh", len(d.nodes), d.quorum); err != nil {
		return err
	}
	if took := time.Since(start); took >= ttl-driver.ClockDrift(ttl) {
		return fmt.Errorf("redlock: refresh confirmed after %s, past its %s TTL", took.Round(time.Millisecond), ttl)
	}
	return nil
}

// Release deletes the lock on every node where token holds it and wakes
// waiters there. It returns once every node has answered, or once a
// majority has and the others have had the node timeout more; a node
// slower than that is released in the background. Waiting for the healthy
// nodes matters: a contended attempt asks one gate node first (see
// gate.go), and a gate still holding a released key would refuse a taker
// that a majority of free nodes would have granted.
func (d *redlock) Release(ctx context.Context, name, token string) error {
	a := d.inflight(token)
	t := d.ask(ctx, releaseTimeout, d.cfg.nodeTimeout, func(ctx context.Context, i int) (int64, error) {
		if a != nil {
			// The grant returned once a majority answered; its request to
			// this node may still be in flight, and must not land after
			// the release and leave the key behind.
			<-a.nodeDone[i]
		}
		return d.releaseNode(ctx, i, name, token, "")
	})
	return t.outcome("release", len(d.nodes), d.quorum)
}

// releaseNode releases name on node i if token holds it. With seq empty
// it is the lease's release: any attempt's key goes, and waiters are
// woken. With seq set it is the cleanup of that failed attempt: only its
// own key goes (a newer attempt of the same token may hold the node now),
// silently, so as not to wake a herd for a lock that nobody released.
func (d *redlock) releaseNode(ctx context.Context, i int, name, token, seq string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, releaseTimeout)
	defer cancel()
	mark, ch := anyAttempt(token), layout.Channel(name)
	if seq != "" {
		mark, ch = oneAttempt(token, seq), ""
	}
	return releaseScript.Run(ctx, d.nodes[i].client, []string{layout.Lock(name)}, mark, ch).Int64()
}

// track remembers a granted attempt until every one of its node requests
// has finished, so that the lease's release can wait for them (see
// Release).
func (d *redlock) track(token string, a *attempt) {
	d.mu.Lock()
	d.live[token] = a
	d.mu.Unlock()
	d.bg.Add(1)
	go func() {
		defer d.bg.Done()
		for _, c := range a.nodeDone {
			<-c
		}
		d.mu.Lock()
		if d.live[token] == a {
			delete(d.live, token)
		}
		d.mu.Unlock()
	}()
}

// inflight returns token's granted attempt while its requests are in
// flight, else nil.
func (d *redlock) inflight(token string) *attempt {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.live[token]
}
