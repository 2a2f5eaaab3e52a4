package zklock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlockdev/dlock/driver"
	"github.com/go-zookeeper/zk"
)

// Refresh confirms that token's node still exists in a session that is
// alive: one Exists call, which ZooKeeper serves from the server the
// session is connected to, after a local check of the session's state.
// It fails at once while the connection is down (the session may still be
// alive: the watchdog retries, and declares the lease lost if the outage
// lasts), returns driver.ErrSessionEnded once the session has expired or
// been replaced, and never re-creates a node. The lease's TTL cannot
// exceed the session timeout.
func (d *zkDriver) Refresh(ctx context.Context, name, token string, ttl time.Duration) error {
	n, ok := d.lookup(name, token)
	if !ok {
		return driver.ErrExpired
	}
	if err := d.alive(n); err != nil {
		return err
	}
	exists, _, err := bounded3(ctx, func() (bool, *zk.Stat, error) { return d.conn.Exists(n.path) })
	if err != nil {
		if errors.Is(err, zk.ErrSessionExpired) {
			return driver.ErrSessionEnded
		}
		return permanent(err, n.path)
	}
	if err := d.alive(n); err != nil {
		return err
	}
	if !exists {
		return d.notHeld(ctx, name)
	}
	if ttl > d.timeout {
		return fmt.Errorf("zookeeper: ttl %s exceeds the session timeout %s: a lease cannot outlast its session", ttl, d.timeout)
	}
	return nil
}

// alive checks, locally, that n's session is the connection's current one
// and is connected.
func (d *zkDriver) alive(n node) error {
	st := d.conn.State()
	switch {
	case st == zk.StateExpired || d.conn.SessionID() != n.session:
		return driver.ErrSessionEnded
	case st != zk.StateHasSession:
		return fmt.Errorf("zookeeper: not connected (%s); the session survives only if it reconnects within its timeout, %s", st, d.timeout)
	}
	return nil
}

// Release deletes token's node, which wakes the next waiter (it watches
// this node). A token this driver did not grant (an attempt given up by
// the portable layer) has every node of its name deleted.
func (d *zkDriver) Release(ctx context.Context, name, token string) error {
	n, ok := d.lookup(name, token)
	if !ok {
		return d.releaseAttempts(ctx, name, token)
	}
	if d.conn.SessionID() != n.session {
		d.forget(name, token)
		return driver.ErrSessionEnded
	}
	_, err := bounded(ctx, func() (struct{}, error) { return struct{}{}, d.conn.Delete(n.path, -1) })
	switch {
	case err == nil:
		d.forget(name, token)
		return nil
	case errors.Is(err, zk.ErrNoNode):
		d.forget(name, token)
		return d.notHeld(ctx, name)
	}
	return permanent(err, n.path)
}

// releaseAttempts deletes every node of token under name.
func (d *zkDriver) releaseAttempts(ctx context.Context, name, token string) error {
	dir := d.dir(name)
	children, err := d.children(ctx, dir)
	if err != nil {
		return err
	}
	deleted := false
	for _, c := range children {
		if !owned(c, token) {
			continue
		}
		_, err := bounded(ctx, func() (struct{}, error) { return struct{}{}, d.conn.Delete(dir+"/"+c, -1) })
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return permanent(err, dir)
		}
		deleted = deleted || err == nil
	}
	if !deleted {
		return driver.ErrExpired
	}
	return nil
}

// notHeld says why a token has no node: ErrTakenOver when some other
// contender is queued for the name, else ErrExpired.
func (d *zkDriver) notHeld(ctx context.Context, name string) error {
	children, err := d.children(ctx, d.dir(name))
	if err == nil && len(queue(children)) > 0 {
		return driver.ErrTakenOver
	}
	return driver.ErrExpired
}
