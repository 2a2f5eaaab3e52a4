package zklock

import (
	"context"
	"errors"
	"path"
	"time"

	"github.com/dlockdev/dlock/driver"
	"github.com/go-zookeeper/zk"
)

// errQueueEntryLost reports that a contender's own node vanished before
// it was granted: its session expired, or someone deleted the node.
var errQueueEntryLost = errors.New("zookeeper: this contender's node vanished (session expired or node deleted)")

// TryAcquire makes one attempt: it creates the token's node at the end
// of the name's queue and holds the lock if that node is first. Otherwise
// it deletes the node again and returns the holder, as ZooKeeper named it.
// A node of the same token already first in the queue (an earlier attempt
// whose reply was lost) is recognised as a grant.
func (d *zkDriver) TryAcquire(ctx context.Context, req driver.Request) (driver.Grant, error) {
	n, alone, err := d.enter(ctx, req)
	if err != nil {
		return driver.Grant{}, err
	}
	if alone {
		return d.grant(req, n), nil
	}
	dir := d.dir(req.Name)
	for range 3 {
		q, i, err := d.look(ctx, dir, n)
		if err != nil {
			d.drop(ctx, n.path)
			return driver.Grant{}, err
		}
		if g, ok, err := d.settle(ctx, req, n, q, i); ok || err != nil {
			return g, err
		}
		h, err := d.describe(ctx, req.Name, dir, q[0].name)
		if errors.Is(err, zk.ErrNoNode) {
			continue // the holder left as we looked: look again
		}
		d.drop(ctx, n.path)
		return driver.Grant{Holder: h}, err
	}
	d.drop(ctx, n.path)
	return driver.Grant{}, errors.New("zookeeper: the queue kept changing under three reads")
}

// settle decides from the queue q (n at index i) whether req holds the
// lock: n is first, or an earlier node of the same token is. ok is false
// when someone else is first.
func (d *zkDriver) settle(ctx context.Context, req driver.Request, n node, q []contender, i int) (driver.Grant, bool, error) {
	switch {
	case i < 0:
		return driver.Grant{}, false, errQueueEntryLost
	case i == 0:
		return d.grant(req, n), true, nil
	case !owned(q[0].name, req.Token):
		return driver.Grant{}, false, nil
	}
	first := d.dir(req.Name) + "/" + q[0].name
	ok, st, err := bounded3(ctx, func() (bool, *zk.Stat, error) { return d.conn.Exists(first) })
	if err != nil || !ok {
		return driver.Grant{}, false, err
	}
	d.drop(ctx, n.path)
	return d.grant(req, node{path: first, czxid: st.Czxid, session: st.EphemeralOwner}), true, nil
}

// grant records n as req's and returns its Grant. The lease lasts at most
// the session timeout, so that the watchdog gives it up before ZooKeeper
// can expire the session and hand the lock on.
func (d *zkDriver) grant(req driver.Request, n node) driver.Grant {
	d.remember(req.Name, req.Token, n)
	return driver.Grant{Acquired: true, Fence: uint64(n.czxid), TTL: min(req.TTL, d.timeout)}
}

// enter creates req's node at the end of the name's queue. alone is true
// when it is the name's only contender, i.e. holds the lock. A create
// whose reply was lost is looked for by its protected name.
func (d *zkDriver) enter(ctx context.Context, req driver.Request) (n node, alone bool, err error) {
	dir := d.dir(req.Name)
	prefix := attemptPrefix(req.Token)
	n, alone, err = d.create(ctx, dir, prefix, req.Owner)
	if errors.Is(err, zk.ErrNoNode) {
		if err = d.makeDir(ctx, dir); err == nil {
			n, alone, err = d.create(ctx, dir, prefix, req.Owner)
		}
	}
	if errors.Is(err, zk.ErrConnectionClosed) {
		return d.findAgain(ctx, dir, prefix, err)
	}
	return n, alone, permanent(err, dir)
}

// create makes the node dir/prefix<seq> in one transaction with a write of
// dir's data, whose Stat gives the transaction's zxid (the node's czxid,
// the fence) and dir's child count after it (1: the node holds the lock).
// When the caller gives up before ZooKeeper answers, the node, if created,
// is deleted in the background.
func (d *zkDriver) create(ctx context.Context, dir, prefix, owner string) (node, bool, error) {
	session := d.conn.SessionID()
	ops := []any{
		&zk.CreateRequest{Path: dir + "/" + prefix, Data: []byte(owner), Acl: d.acl, Flags: zk.FlagEphemeralSequential},
		&zk.SetDataRequest{Path: dir, Version: -1},
	}
	d.bg.Add(1)
	res, err := boundedAfter(ctx, func() ([]zk.MultiResponse, error) { return d.conn.Multi(ops...) },
		func(res []zk.MultiResponse, err error, abandoned bool) {
			defer d.bg.Done()
			if abandoned {
				d.abandoned(dir, prefix, res, err)
			}
		})
	if err != nil {
		return node{}, false, err
	}
	st := res[1].Stat
	return node{path: res[0].String, czxid: st.Mzxid, session: session}, st.NumChildren == 1, nil
}

// abandoned cleans up after a create whose caller gave up: the node it
// made, or, when its outcome is unknown, any node of its attempt.
func (d *zkDriver) abandoned(dir, prefix string, res []zk.MultiResponse, err error) {
	switch {
	case err == nil:
		_ = d.conn.Delete(res[0].String, -1)
	case transportErr(err):
		d.sweep(dir, prefix)
	}
}

// findAgain looks for the node of an attempt whose create reply was lost
// (the connection dropped): it exists if the create was applied. It waits
// for the connection to come back, within ctx and the session timeout
// (past which the session, and the node with it, is gone). Not found, the
// attempt failed with cause and may be retried. When the lookup fails
// too, the node is swept in the background once the connection is back.
func (d *zkDriver) findAgain(ctx context.Context, dir, prefix string, cause error) (node, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	children, err := d.children(ctx, dir)
	for transportErr(err) && d.reconnected(ctx) == nil {
		children, err = d.children(ctx, dir)
	}
	if err != nil {
		d.background(func() { d.sweep(dir, prefix) })
		return node{}, false, cause
	}
	for _, c := range children {
		if len(c) > len(prefix) && c[:len(prefix)] == prefix {
			p := dir + "/" + c
			ok, st, err := bounded3(ctx, func() (bool, *zk.Stat, error) { return d.conn.Exists(p) })
			if err != nil || !ok {
				break
			}
			return node{path: p, czxid: st.Czxid, session: st.EphemeralOwner}, false, nil
		}
	}
	return node{}, false, cause
}

// reconnected waits until the connection has a session again (polling
// its state), or ctx is done.
func (d *zkDriver) reconnected(ctx context.Context) error {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for d.conn.State() != zk.StateHasSession {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-d.done:
			return zk.ErrClosing
		case <-tick.C:
		}
	}
	return nil
}

// sweep deletes every node of an attempt, once ZooKeeper answers, trying
// for up to two session timeouts (after which an unreachable session has
// expired and its nodes with it) or until Close.
func (d *zkDriver) sweep(dir, prefix string) {
	deadline := time.Now().Add(2 * d.timeout)
	for time.Now().Before(deadline) {
		children, _, err := d.conn.Children(dir)
		if err == nil || errors.Is(err, zk.ErrNoNode) {
			for _, c := range children {
				if len(c) > len(prefix) && c[:len(prefix)] == prefix {
					_ = d.conn.Delete(dir+"/"+c, -1)
				}
			}
			return
		}
		select {
		case <-d.done:
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// background runs fn in a goroutine that Close waits for.
func (d *zkDriver) background(fn func()) {
	d.bg.Add(1)
	go func() {
		defer d.bg.Done()
		fn()
	}()
}

// drop deletes a node the caller no longer wants (a failed or given-up
// attempt), with its own short deadline, and in the background if that
// fails.
func (d *zkDriver) drop(ctx context.Context, p string) {
	dctx, cancel := detached(ctx)
	defer cancel()
	_, err := bounded(dctx, func() (struct{}, error) { return struct{}{}, d.conn.Delete(p, -1) })
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		d.background(func() { d.sweep(path.Dir(p), path.Base(p)[:len(path.Base(p))-seqDigits]) })
	}
}

// makeDir creates a lock's parent znode as a container (ZooKeeper deletes
// it once it has had children and has none left), and the root first
// when it is missing.
func (d *zkDriver) makeDir(ctx context.Context, dir string) error {
	_, err := bounded(ctx, func() (string, error) { return d.conn.CreateContainer(dir, nil, zk.FlagContainer, d.acl) })
	if errors.Is(err, zk.ErrNoNode) {
		if err = d.makeRoot(ctx); err == nil {
			_, err = bounded(ctx, func() (string, error) { return d.conn.CreateContainer(dir, nil, zk.FlagContainer, d.acl) })
		}
	}
	if errors.Is(err, zk.ErrNodeExists) {
		return nil
	}
	return permanent(err, dir)
}

// makeRoot creates the root znode and its missing ancestors (persistent).
func (d *zkDriver) makeRoot(ctx context.Context) error {
	for i := 1; i <= len(d.root); i++ {
		if i < len(d.root) && d.root[i] != '/' {
			continue
		}
		p := d.root[:i]
		_, err := bounded(ctx, func() (string, error) { return d.conn.Create(p, nil, zk.FlagPersistent, d.acl) })
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return permanent(err, p)
		}
	}
	return nil
}

// look reads dir's queue and finds n in it (i is -1 when n is gone).
func (d *zkDriver) look(ctx context.Context, dir string, n node) (q []contender, i int, err error) {
	children, err := d.children(ctx, dir)
	if err != nil {
		return nil, -1, err
	}
	q = queue(children)
	base := path.Base(n.path)
	for i, c := range q {
		if c.name == base {
			return q, i, nil
		}
	}
	return q, -1, nil
}

// children lists dir's children; a missing dir has none.
func (d *zkDriver) children(ctx context.Context, dir string) ([]string, error) {
	c, err := bounded(ctx, func() ([]string, error) {
		c, _, err := d.conn.Children(dir)
		return c, err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	return c, permanent(err, dir)
}

// describe reads the contender child of dir as the holder of name.
func (d *zkDriver) describe(ctx context.Context, name, dir, child string) (driver.Holder, error) {
	type got struct {
		data []byte
		st   *zk.Stat
	}
	g, err := bounded(ctx, func() (got, error) {
		data, st, err := d.conn.Get(dir + "/" + child)
		return got{data, st}, err
	})
	if err != nil {
		return driver.Holder{}, permanent(err, dir)
	}
	return driver.Holder{Name: name, Owner: string(g.data), Fence: uint64(g.st.Czxid), TTL: -1}, nil
}

// bounded3 is bounded for the calls that return a bool and a Stat.
func bounded3(ctx context.Context, f func() (bool, *zk.Stat, error)) (bool, *zk.Stat, error) {
	type got struct {
		ok bool
		st *zk.Stat
	}
	g, err := bounded(ctx, func() (got, error) {
		ok, st, err := f()
		return got{ok, st}, err
	})
	return g.ok, g.st, err
}
