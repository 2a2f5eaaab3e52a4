package zklock

import (
	"context"
	"errors"
	"time"

	"github.com/dlockdev/dlock/driver"
	"github.com/go-zookeeper/zk"
)

// AcquireWait queues req.Token behind every earlier contender for the
// name (the Curator recipe): its node's sequence number is its place, and
// it waits until every earlier node is gone, watching only the node just
// before its own, so that a release wakes exactly one waiter. The session
// keeps the waiter's node alive while it waits. When ctx is done, the
// waiter deletes its node at once and returns ctx's error with the holder
// ZooKeeper last named.
//
// A connection loss does not end the wait: while the session lives the
// waiter keeps its place and waits for the connection to come back; when
// the session has ended (its node with it), it queues again.
func (d *zkDriver) AcquireWait(ctx context.Context, req driver.Request) (driver.Grant, error) {
	for {
		g, err := d.queueUp(ctx, req)
		if err == nil || ctx.Err() != nil || !retryable(err) {
			return g, err
		}
		if rerr := d.pauseRetry(ctx); rerr != nil {
			return g, rerr
		}
	}
}

// pauseRetry waits for the connection, and a moment more, before a
// waiter queues again, so that a flapping connection is no hot loop.
func (d *zkDriver) pauseRetry(ctx context.Context) error {
	if err := d.reconnected(ctx); err != nil {
		return err
	}
	t := time.NewTimer(20 * time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// retryable reports the errors after which a waiter may queue again: the
// connection dropped, or the session (and the waiter's node) ended.
func retryable(err error) bool {
	return errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrNoServer) ||
		errors.Is(err, zk.ErrSessionExpired) || errors.Is(err, errQueueEntryLost)
}

// queueUp is one pass of AcquireWait, on one node.
func (d *zkDriver) queueUp(ctx context.Context, req driver.Request) (driver.Grant, error) {
	sent := time.Now()
	n, alone, err := d.enter(ctx, req)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			err = cerr
		}
		return driver.Grant{}, err
	}
	if alone {
		return since(d.grant(req, n), sent), nil
	}
	return d.waitTurn(ctx, req, n)
}

// turnWait is the state of one queued waiter between its turns.
type turnWait struct {
	dir   string        // the lock's znode
	fresh time.Duration // how recent a watch must be to grant without a read
	head  string        // the queue's head at the last read, for abandon
}

// waitTurn waits with n queued until n is the head of the queue (the
// grant), or abandons n when a read or a watch fails or ctx ends.
func (d *zkDriver) waitTurn(ctx context.Context, req driver.Request, n node) (driver.Grant, error) {
	w := turnWait{dir: d.dir(req.Name), fresh: min(req.TTL, d.timeout) / 3}
	for {
		g, granted, err := d.nextTurn(ctx, req, n, &w)
		if err != nil {
			return d.abandon(ctx, req, n, w.head, err)
		}
		if granted {
			return g, nil
		}
	}
}

// nextTurn reads the queue once and, unless n holds the lock now, waits
// for the node just ahead of n to go. granted: g is the grant; neither
// granted nor an error: read again (a dropped connection n's session
// survived, or a turn that needs confirming).
func (d *zkDriver) nextTurn(ctx context.Context, req driver.Request, n node, w *turnWait) (g driver.Grant, granted bool, err error) {
	sent := time.Now()
	q, i, err := d.look(ctx, w.dir, n)
	if err != nil {
		return driver.Grant{}, false, d.unlessRiddenOut(ctx, n, err)
	}
	if g, ok, err := d.settle(ctx, req, n, q, i); err != nil || ok {
		return since(g, sent), ok, err
	}
	w.head = q[0].name
	watched := time.Now()
	gone, err := d.waitGone(ctx, w.dir+"/"+q[i-1].name)
	if err != nil {
		return driver.Grant{}, false, d.unlessRiddenOut(ctx, n, err)
	}
	// The holder itself went: nothing was queued before it and every node
	// created since comes after n, so n holds the lock now, without
	// another read. The watch was set up by a call that confirmed the
	// session alive when it was sent; if that was long ago, read the queue
	// again instead, which confirms it anew.
	if gone && i == 1 && time.Since(watched) < w.fresh && d.alive(n) == nil {
		return since(d.grant(req, n), watched), true, nil
	}
	return driver.Grant{}, false, nil
}

// unlessRiddenOut is err, or nil when it is a dropped connection that n's
// session rode out (rideOut): the waiter then reads the queue again.
func (d *zkDriver) unlessRiddenOut(ctx context.Context, n node, err error) error {
	if d.rideOut(ctx, n, err) {
		return nil
	}
	return err
}

// rideOut reports whether err is a dropped connection that n's session
// survives so far: then it waits for the connection to come back and the
// waiter goes on with its node.
func (d *zkDriver) rideOut(ctx context.Context, n node, err error) bool {
	if !errors.Is(err, zk.ErrConnectionClosed) && !errors.Is(err, zk.ErrNoServer) {
		return false
	}
	return d.reconnected(ctx) == nil && d.conn.SessionID() == n.session
}

// since sets a grant's Since: the session, and the node with it, was
// confirmed alive by the call sent then.
func since(g driver.Grant, sent time.Time) driver.Grant {
	g.Since = sent
	return g
}

// waitGone waits for an event on the node at p: gone is true when it was
// deleted (or was already gone); any other event returns false, and the
// caller reads the queue again.
func (d *zkDriver) waitGone(ctx context.Context, p string) (gone bool, err error) {
	type got struct {
		ok bool
		ch <-chan zk.Event
	}
	g, err := bounded(ctx, func() (got, error) {
		ok, _, ch, err := d.conn.ExistsW(p)
		return got{ok, ch}, err
	})
	if err != nil || !g.ok {
		return err == nil, err
	}
	select {
	case <-ctx.Done():
		return false, ctx.Err()
	case ev := <-g.ch:
		if ev.Type == zk.EventNotWatching {
			return false, ev.Err // the session expired, or the connection is closing
		}
		return ev.Type == zk.EventNodeDeleted, nil
	}
}

// abandon leaves the queue (deletes n) and returns err, or ctx's error
// when ctx is done, with the holder of the lock when ZooKeeper named one
// (head, the first contender at the last look).
func (d *zkDriver) abandon(ctx context.Context, req driver.Request, n node, head string, err error) (driver.Grant, error) {
	if cerr := ctx.Err(); cerr != nil {
		err = cerr
	}
	d.drop(ctx, n.path)
	if head == "" {
		return driver.Grant{}, err
	}
	dctx, cancel := detached(ctx)
	defer cancel()
	h, herr := d.describe(dctx, req.Name, d.dir(req.Name), head)
	if herr != nil {
		// ZooKeeper did name a holder; only its details are unknown.
		h = driver.Holder{Name: req.Name, TTL: -1}
	}
	return driver.Grant{Holder: h}, err
}
