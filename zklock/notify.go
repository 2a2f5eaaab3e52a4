package zklock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// This file makes the driver a driver.Notifier, for the portable layer's
// primitives (semaphores, read-write locks), which wait for a release of
// any of several names. A mutex's wait does not use it: the portable layer
// prefers the driver's own queue (AcquireWait) whenever the driver has one.

// A watch that ZooKeeper refused to set again (the connection is down,
// the session expired) is retried after a delay doubling from rewatchMin
// to rewatchMax.
const (
	rewatchMin = 50 * time.Millisecond
	rewatchMax = 2 * time.Second
)

// statePoll is how often a release watch looks at the connection's state,
// to wake its waiter when the session is lost and again when it is back.
const statePoll = 100 * time.Millisecond

var (
	// errDriverClosed is a Watch made, or a watch call cut short, by Close.
	errDriverClosed = errors.New("zookeeper: the driver is closed")
	// errWatchStopped is a watch call cut short by the watch's stop.
	errWatchStopped = errors.New("zookeeper: the release watch was stopped")
	// errDirUnsettled is a lock's znode that kept appearing and vanishing
	// while a watch was being set on it.
	errDirUnsettled = errors.New("zookeeper: the lock's znode kept appearing and vanishing under three reads")
)

// Watch implements driver.Notifier: it watches the children of name's
// znode (its contenders, see keys.go) and returns once ZooKeeper has set
// the watch, so that a release after Watch returns is never missed. When
// nobody ever held name, its znode does not exist: Watch then watches for
// its creation instead (creating it would leave an empty znode behind for
// every name ever waited for), and its children from then on.
//
// The channel receives (coalesced) when the lock may have become free:
// when the first contender of the last read is gone (a release, the end of
// its session, a force-release), or when the lock has no contender left.
// A failed attempt of another waiter (a node created and deleted behind
// the holder's) wakes nobody, so that waiters do not wake one another in
// turn while the holder keeps the lock.
//
// ZooKeeper watches fire once: each event sets the watch again with a new
// read of the children. The channel also receives when the connection
// loses its session and when it has one again, and when the watch ends
// (the session expired): a release may have gone unseen. The watch is
// then set again, retrying with a doubling delay; the channel never
// closes. stop ends the watch and waits for its goroutine; so does the
// driver's Close. A request the watch had in flight (go-zookeeper takes
// no context, and a request sent while disconnected waits for the
// connection) is left to finish on its own, and Close waits for it as it
// does for every clean-up. The watch set by ZooKeeper is not removed (the
// client cannot remove one watch): it fires once, into a buffered channel
// that nobody reads.
func (d *zkDriver) Watch(ctx context.Context, name string) (<-chan struct{}, func(), error) {
	select {
	case <-d.done:
		return nil, nil, fmt.Errorf("watch zookeeper releases of %q: %w", name, errDriverClosed)
	default:
	}
	r := &releaseWatch{
		d: d, dir: d.dir(name), ch: make(chan struct{}, 1),
		quit: make(chan struct{}), done: make(chan struct{}),
	}
	connected := d.conn.State() == zk.StateHasSession
	a, err := r.arm(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("watch zookeeper releases of %q: %w", name, err)
	}
	d.background(func() { r.run(a, connected) })
	stop := sync.OnceFunc(func() {
		close(r.quit)
		<-r.done
	})
	return r.ch, stop, nil
}

// releaseWatch is one Watch: changes among the children of dir wake ch.
type releaseWatch struct {
	d    *zkDriver
	dir  string
	ch   chan struct{}
	quit chan struct{} // closed by stop
	done chan struct{} // closed when run returns
}

// armed is one read of a lock's znode with a watch set by it.
type armed struct {
	events   <-chan zk.Event // the watch's one event
	children []string        // dir's children at the read; none when dir is missing
	exists   bool            // the read found dir
}

// head is the first contender of the read, or "" when there is none.
func (a armed) head() string {
	if q := queue(a.children); len(q) > 0 {
		return q[0].name
	}
	return ""
}

// freed reports whether the lock may have become free between the reads
// prev and a: the first contender of prev is gone, or a finds none.
func (a armed) freed(prev armed) bool {
	h := prev.head()
	return a.head() == "" || (h != "" && !slices.Contains(a.children, h))
}

// run follows the watch armed by a until stop or Close, setting it again
// after each event and signalling when the lock may have become free or
// the connection's session came or went (connected: it had one at the
// start). It closes r.done when it returns.
func (r *releaseWatch) run(a armed, connected bool) {
	defer close(r.done)
	tick := time.NewTicker(statePoll)
	defer tick.Stop()
	for {
		select {
		case <-r.quit:
			return
		case <-r.d.done:
			return
		case <-tick.C:
			if now := r.d.conn.State() == zk.StateHasSession; now != connected {
				connected = now
				r.signal() // lost: let the waiter look; back: a release may have gone unseen
			}
		case ev := <-a.events:
			var ok bool
			if a, ok = r.next(a, ev); !ok {
				return
			}
		}
	}
}

// next sets the watch again after ev, the event of the watch armed by
// prev, and signals when the lock may have become free meanwhile, or when
// the watch had ended (a change may have gone unseen). ok is false when
// the watch was stopped or the driver closed.
func (r *releaseWatch) next(prev armed, ev zk.Event) (a armed, ok bool) {
	ended := ev.Type == zk.EventNotWatching // the session expired, or the connection is closing
	if ended {
		r.signal()
	}
	if a, ok = r.rearm(); ok && (ended || a.freed(prev)) {
		r.signal()
	}
	return a, ok
}

// rearm sets the watch again, retrying after a doubling delay while
// ZooKeeper fails. The first failure signals (a release may go unseen
// while no watch is set), and so does the success that follows failures.
// ok is false when the watch was stopped or the driver closed.
func (r *releaseWatch) rearm() (armed, bool) {
	delay := rewatchMin
	for failed := false; ; failed = true {
		a, err := r.arm(context.Background())
		switch {
		case err == nil:
			if failed {
				r.signal()
			}
			return a, true
		case errors.Is(err, errWatchStopped), errors.Is(err, errDriverClosed):
			return armed{}, false
		case !failed:
			r.signal()
		}
		if !r.pause(delay) {
			return armed{}, false
		}
		delay = min(2*delay, rewatchMax)
	}
}

// pause waits for delay; false when the watch was stopped or the driver
// closed first.
func (r *releaseWatch) pause(delay time.Duration) bool {
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-r.quit:
		return false
	case <-r.d.done:
		return false
	case <-t.C:
		return true
	}
}

// arm reads dir's children and sets a watch on them; when dir is missing,
// it sets a watch on its creation instead.
func (r *releaseWatch) arm(ctx context.Context) (armed, error) {
	for range 3 {
		a, err := r.call(ctx, func() (armed, error) {
			children, _, ch, err := r.d.conn.ChildrenW(r.dir)
			return armed{events: ch, children: children, exists: true}, err
		})
		if !errors.Is(err, zk.ErrNoNode) {
			return a, permanent(err, r.dir)
		}
		a, err = r.call(ctx, func() (armed, error) {
			ok, _, ch, err := r.d.conn.ExistsW(r.dir)
			return armed{events: ch, exists: ok}, err
		})
		// Found after all (created since the first read), dir's watch is
		// on its data, not on its children: read them again.
		if err != nil || !a.exists {
			return a, permanent(err, r.dir)
		}
	}
	return armed{}, errDirUnsettled
}

// call runs f, a go-zookeeper call, on a goroutine that the driver's
// Close waits for, and returns its outcome, or an error when ctx ends,
// the watch is stopped or the driver closed first: f then runs to its end
// (go-zookeeper answers every request, once connected or when the
// connection is closed) and its outcome is dropped.
func (r *releaseWatch) call(ctx context.Context, f func() (armed, error)) (armed, error) {
	if err := ctx.Err(); err != nil {
		return armed{}, err
	}
	res := make(chan outcome[armed], 1)
	r.d.background(func() {
		v, err := f()
		res <- outcome[armed]{v, err}
	})
	select {
	case o := <-res:
		return o.v, o.err
	case <-ctx.Done():
		return armed{}, ctx.Err()
	case <-r.quit:
		return armed{}, errWatchStopped
	case <-r.d.done:
		return armed{}, errDriverClosed
	}
}

// signal wakes the waiter, unless a wake is already pending.
func (r *releaseWatch) signal() {
	select {
	case r.ch <- struct{}{}:
	default:
	}
}
