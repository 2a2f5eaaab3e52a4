package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dlockdev/dlock/driver"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// This file makes the driver a driver.Notifier, for the portable layer's
// primitives (semaphores, read-write locks), which wait for a release of
// any of several keys. A mutex's wait does not use it: the portable layer
// prefers the driver's own queue (AcquireWait) whenever the driver has one.

// watchCreateTimeout bounds how long Watch waits for etcd to confirm the
// watch; past it the caller falls back to polling.
const watchCreateTimeout = 5 * time.Second

// A watch that etcd ended (a compaction it must resume past, a member
// that lost its leader) is made again after a delay doubling from
// rewatchMin to rewatchMax while etcd keeps refusing.
const (
	rewatchMin = 50 * time.Millisecond
	rewatchMax = 2 * time.Second
)

// errReleaseWatchRefused is a release watch that ended before etcd
// confirmed it.
var errReleaseWatchRefused = errors.New("etcd ended the release watch before confirming it")

// Watch implements driver.Notifier: it watches the deletions of the keys
// in name's directory (see keyspace), the holder's and the waiters' alike,
// and returns once etcd has confirmed the watch, so that a release after
// Watch returns is never missed. A deletion is a release, a lease that
// expired or was revoked, a force-release, or a waiter that left; the
// channel receives (coalesced) on each, since the lock may be free.
//
// The watch requires a leader (clientv3.WithRequireLeader): a member cut
// off from its cluster ends it rather than keeping it silently. When etcd
// ends the watch, the channel receives at once (a deletion may have been
// missed) and again once the watch is made anew, from etcd's current
// revision; it never closes. stop ends the watch and waits for the
// goroutine that follows it; so does the driver's Close.
func (d *etcdDriver) Watch(ctx context.Context, name string) (<-chan struct{}, func(), error) {
	r := &releaseWatch{cli: d.cli, dir: d.keys.dir(name), ch: make(chan struct{}, 1), done: make(chan struct{})}
	base, cancel := context.WithCancel(clientv3.WithRequireLeader(d.pool.ctx))
	wch, wcancel, err := r.open(ctx, base)
	if err != nil {
		cancel()
		if d.pool.ctx.Err() != nil {
			err = errClosed
		}
		return nil, nil, fmt.Errorf("watch etcd releases of %q: %w", name, err)
	}
	if !d.pool.spawn(func() { r.run(base, wch, wcancel) }) {
		wcancel()
		cancel()
		drainWatch(wch)
		return nil, nil, fmt.Errorf("watch etcd releases of %q: %w", name, errClosed)
	}
	stop := sync.OnceFunc(func() {
		cancel()
		<-r.done
	})
	return r.ch, stop, nil
}

// spawn runs f on a goroutine that Close waits for, unless the pool is
// closed (false). Close cancels p.ctx first, which f must heed.
func (p *pool) spawn(f func()) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		f()
	}()
	return true
}

// releaseWatch is one Watch: the deletions under dir wake ch.
type releaseWatch struct {
	cli  *clientv3.Client
	dir  string
	ch   chan struct{}
	done chan struct{} // closed when run returns
}

// open starts a watch of the deletions under r.dir, bound to base, and
// waits (within ctx and watchCreateTimeout) until etcd confirms it. The
// returned cancel ends that watch alone.
func (r *releaseWatch) open(ctx, base context.Context) (clientv3.WatchChan, context.CancelFunc, error) {
	wctx, cancel := context.WithCancel(base)
	wch := r.cli.Watch(wctx, r.dir, clientv3.WithPrefix(), clientv3.WithFilterPut(), clientv3.WithCreatedNotify())
	tctx, tcancel := context.WithTimeout(ctx, watchCreateTimeout)
	defer tcancel()
	var err error
	select {
	case resp, ok := <-wch:
		if ok && resp.Created && resp.Err() == nil {
			return wch, cancel, nil
		}
		if err = resp.Err(); err == nil {
			err = errReleaseWatchRefused
		}
	case <-tctx.Done():
		err = tctx.Err()
	}
	cancel()
	drainWatch(wch) // the client closes it once canceled
	return nil, nil, err
}

// run follows the watch wch (ended by cancel) until base is canceled,
// making it again whenever etcd ends it, then closes r.done.
func (r *releaseWatch) run(base context.Context, wch clientv3.WatchChan, cancel context.CancelFunc) {
	defer close(r.done)
	for {
		r.follow(wch)
		cancel()
		drainWatch(wch)
		if base.Err() != nil {
			return
		}
		r.signal() // a deletion may have gone unseen: let the waiter look
		if wch, cancel = r.reopen(base); wch == nil {
			return
		}
		r.signal() // and look again now that the new watch is in place
	}
}

// follow signals on each response with a deletion, until etcd ends the
// watch or its context is canceled.
func (r *releaseWatch) follow(wch clientv3.WatchChan) {
	for resp := range wch {
		if resp.Canceled || resp.Err() != nil {
			return
		}
		for _, ev := range resp.Events {
			if ev.Type == mvccpb.DELETE {
				r.signal()
				break
			}
		}
	}
}

// reopen makes the watch again, retrying after a doubling delay, until
// etcd confirms it (its channel and cancel) or base is canceled (nil). A
// closed client is not retried: the watch then waits for stop or Close.
func (r *releaseWatch) reopen(base context.Context) (clientv3.WatchChan, context.CancelFunc) {
	delay := rewatchMin
	for {
		if wch, cancel, err := r.open(base, base); err == nil {
			return wch, cancel
		}
		if r.cli.Ctx().Err() != nil {
			<-base.Done()
			return nil, nil
		}
		t := time.NewTimer(delay)
		select {
		case <-base.Done():
			t.Stop()
			return nil, nil
		case <-t.C:
		}
		delay = min(2*delay, rewatchMax)
	}
}

// signal wakes the waiter, unless a wake is already pending.
func (r *releaseWatch) signal() {
	select {
	case r.ch <- struct{}{}:
	default:
	}
}

var _ driver.Notifier = (*etcdDriver)(nil)
