package pglock

import (
	"context"
	"errors"
	"time"

	"github.com/dlockdev/dlock/driver"
)

var (
	_ driver.EvictionWatcher = (*leases)(nil)
	_ driver.EvictionWatcher = (*advisory)(nil)
)

// A force-release is announced with NOTIFY on the eviction channel (the
// table's name plus "_evicted") as "FENCE NAME": the evicted grant's fence
// and name. The NOTIFY is part of the transaction that evicts, so it is
// delivered only if the eviction committed. Names are at most
// dlock.MaxNameLen (512) bytes, far below NOTIFY's 8000-byte payload.
// The statements are leaseForceRelease and advisoryEvict.

// evictionBuffer is how many evictions a watcher's channel holds; more are
// dropped for that watcher (its holders learn at their next refresh).
const evictionBuffer = 64

// errListenerLost reports that the listening connection failed while an
// eviction watcher subscribed.
var errListenerLost = errors.New("pglock: the LISTEN connection failed; evictions are learnt at the next refresh")

// WatchEvictions subscribes to the force-releases announced on the
// eviction channel, on the driver's one listening connection (the one the
// waiters use). The LISTEN is active when it returns. The channel is
// closed if the listening connection fails.
func (l *listener) WatchEvictions(ctx context.Context) (<-chan driver.Eviction, func(), error) {
	if err := l.ensure(ctx); err != nil {
		return nil, nil, err
	}
	ch := make(chan driver.Eviction, evictionBuffer)
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.running { // the connection failed since ensure
		return nil, nil, errListenerLost
	}
	l.evicts[ch] = struct{}{}
	return ch, func() { l.unwatchEvictions(ch) }, nil
}

func (l *listener) unwatchEvictions(ch chan driver.Eviction) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.evicts, ch)
}

// evicted hands e to every eviction watcher, without blocking, and then,
// if a watcher took it, to onEvict.
func (l *listener) evicted(e driver.Eviction) {
	l.mu.Lock()
	taken := false
	for ch := range l.evicts {
		select {
		case ch <- e:
			taken = true
		default:
		}
	}
	l.mu.Unlock()
	if taken && l.onEvict != nil {
		l.onEvict(e)
	}
}

// watchingEvictions returns, while the listening connection runs and an
// eviction watcher is subscribed, a channel closed when the connection
// ends; nil otherwise.
func (l *listener) watchingEvictions() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.running || len(l.evicts) == 0 {
		return nil
	}
	return l.done
}

// WatchEvictions (driver.EvictionWatcher) subscribes to the
// force-releases of this table's locks, by any client: ForceRelease
// notifies them on the table's eviction channel in the statement that
// evicts.
func (d *leases) WatchEvictions(ctx context.Context) (<-chan driver.Eviction, func(), error) {
	return d.listener.WatchEvictions(ctx)
}

// WatchEvictions (driver.EvictionWatcher) subscribes to the
// force-releases of this prefix's locks, by any client: ForceRelease
// notifies them in the transaction that terminates the holder's backend.
func (d *advisory) WatchEvictions(ctx context.Context) (<-chan driver.Eviction, func(), error) {
	return d.listener.WatchEvictions(ctx)
}

// evictionGrace is how long an advisory session whose backend was
// terminated by an administrator waits for the eviction notice before it
// reports the loss of its session. ForceRelease terminates the backend
// and then commits the NOTIFY, so the holder sees its connection close
// just before the notice arrives on the listening connection; waiting for
// it lets the lease end as force-released rather than as a lost session.
// The wait happens only while an eviction watcher is subscribed, and ends
// early if the listening connection fails too (a server shutdown).
const evictionGrace = time.Second

// markEvicted is the advisory listener's onEvict: it flags the sessions
// that e evicted, whose watchers then leave the lease's end to the
// portable layer's eviction watcher.
func (d *advisory) markEvicted(e driver.Eviction) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, s := range d.sessions {
		if s.name == e.Name && s.fence == e.Fence {
			s.markEvicted()
		}
	}
}
