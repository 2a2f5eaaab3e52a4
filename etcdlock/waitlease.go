package etcdlock

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/dlockdev/dlock/driver"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A waiter's key does not wait under the lease of the lock's TTL: a
// waiter that dies (SIGKILL, a crash) would keep its place in the queue,
// and then the lock, until that lease ran out, however long the TTL. It
// waits under the driver's wait lease instead: the shared lease of the
// driver's shortest TTL, MinTTLFor(the election timeout) (2 s for an
// election timeout of 250 ms, 8 s for etcd's default 1 s), which the
// waiter renews every third of it while it lives. A dead waiter's key
// thus ends within that much of its death, whatever the lock's TTL, while
// a live waiter's renewals get through an ordinary leader election (see
// MinTTLFor).
//
// When the waiter becomes first, its key moves to the lease of the lock's
// TTL in one transaction that requires the key unchanged since the
// waiter put it (a sweep or a lapse makes it fail, see claim.go): a Put to
// an existing key keeps its create revision, so the waiter keeps its
// place and its fence, and the grant never rides on the wait lease. The
// grant's TTL counts from the last renewal of the lease it moved to.
//
// A lock whose TTL is the wait lease's needs no move: its waiters queue
// under the lease of its TTL, as holders do. Otherwise the transaction
// that tries for a free lock (under the lock's lease) queues the key
// under the wait lease when the lock is held, if the driver has a wait
// lease at hand (ready); if not, join queues it in one write more. The
// waiters of one driver share the wait lease and its renewals.

// waitSecs is the wait lease's length in seconds.
func (d *etcdDriver) waitSecs() int64 { return int64(d.minTTL / time.Second) }

// rebind binds key to a usable session for secs, granting or renewing it
// as get does, and returns it with the time its TTL started counting.
// For a key that is to wait under it, the session need only be young
// (see young), and the key leaves its old binding now (it is not under
// the old lease: about to be put anew). Otherwise (a grant) the session
// must be fresh, and the key stays bound to its old session as well,
// until settle says where the write that moves it left it.
func (p *pool) rebind(ctx context.Context, key string, secs int64, wait bool) (*session, time.Time, error) {
	_, s, since, err := p.take(ctx, secs, binding{key: key, wait: wait})
	return s, since, err
}

// young reports whether a waiter's key can go under s without a renewal
// first: s was renewed less than a third of a TTL ago, so that its
// renewals, every third of a TTL from then (see waiter.renewed), keep it
// alive. A waiting key is no grant: no TTL counts from s.since. p.mu is
// held.
func (s *session) young() bool { return time.Since(s.since) < s.ttl/3 }

// ready binds key, keeping its old binding, to the current session for
// secs if a waiting key can go under it at once (see young), and returns
// the session with the time its TTL started counting; nil when it would
// need a grant or a renewal first.
func (p *pool) ready(key string, secs int64) (*session, time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.current[secs]
	if p.closed || s == nil || !s.young() {
		return nil, time.Time{}
	}
	p.rebound(key, s, true)
	return s, s.since
}

// rebound binds key to s, asked for now. p.mu is held.
func (p *pool) rebound(key string, s *session, keep bool) {
	s.mark(key, time.Now())
	old := p.byKey[key]
	switch {
	case old == s:
	case keep && old != nil:
		if prev := p.moving[key]; prev != nil && prev != s {
			prev.unmark(key)
			p.idleCheck(prev)
		}
		p.moving[key] = s
	default:
		if old != nil {
			old.unmark(key)
			p.idleCheck(old)
		}
		p.byKey[key] = s
	}
}

// settle ends key's move to s: moved, the key lives under s alone now;
// not moved (the write was refused), it never left its old session.
func (p *pool) settle(key string, s *session, moved bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.moving[key] != s {
		return // dropped meanwhile
	}
	delete(p.moving, key)
	from := s
	if moved {
		from = p.byKey[key]
		p.byKey[key] = s
	}
	if from != nil {
		from.unmark(key)
		p.idleCheck(from)
	}
}

// unbind forgets that key lives under s, which ended with every key under
// it; a key still bound to another session (a move not settled) stays
// bound to that one. p.mu is held.
func (p *pool) unbind(key string, s *session) {
	switch to := p.moving[key]; {
	case to == s:
		delete(p.moving, key)
	case p.byKey[key] != s:
	case to != nil:
		p.byKey[key] = to
		delete(p.moving, key)
	default:
		p.unlink(key)
	}
}

// join puts the waiter's key, which the name's holder kept from being
// granted at once, under the wait lease and, in the same transaction,
// reads the two newest contenders (itself and its predecessor) and the
// holder: when put could not queue it at once (no wait lease at hand),
// one write more. The key was bound to the lock's session: it moves to
// the wait session first, so that the lease it is put under never ends
// unnoticed.
func (w *waiter) join(ctx context.Context, value string) (*clientv3.TxnResponse, error) {
	resp, err := w.joinOnce(ctx, value)
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		w.d.pool.gone(w.sess) // ended since its last renewal; take a new one, once
		resp, err = w.joinOnce(ctx, value)
	}
	return resp, err
}

func (w *waiter) joinOnce(ctx context.Context, value string) (*clientv3.TxnResponse, error) {
	s, since, err := w.d.pool.rebind(ctx, w.key, w.d.waitSecs(), true)
	if err != nil {
		w.d.pool.done(w.call, w.key) // never put: nothing to clean up
		return nil, err
	}
	w.sess, w.short = s, true
	w.renewed(since)
	w.d.step("session")
	dir := w.d.keys.dir(w.name)
	return w.d.cli.Txn(ctx).Then(
		clientv3.OpPut(w.key, value, clientv3.WithLease(s.id)),
		clientv3.OpGet(dir, newest()...),
		clientv3.OpGet(dir, clientv3.WithFirstCreate()...),
	).Commit()
}

// handedOff is the grant of a waiter without a deadline that became first
// while its key was on the wait lease: the key holds its held value
// already (such a waiter is never swept), so the grant needs no write, and
// the move to the lease of the lock's TTL waits for the grant's first
// refresh (moveHandedOff) instead of standing between the release and
// the grant: one write in series a hand-off (the release's delete), not
// two. Until that refresh the grant is provisional (driver.Grant.Window):
// it lasts as long as the wait lease does from its last renewal, which
// the waiter's Locker no longer sends for it, so that a holder that dies
// or stalls before its first refresh loses the lock within the wait
// lease, as a waiter would. A lease without the watchdog is moved before
// its acquire returns (the portable layer confirms it).
func (w *waiter) handedOff() driver.Grant {
	g := granted(w.rev, w.secs, w.since)
	g.Window = w.sess.ttl
	return g
}

// moveHandedOff moves the keys of items that a queue granted on the wait
// lease (handedOff) to the lease of their TTL, each only if its token
// still holds it and its value is unchanged (takeBack), before a refresh
// renews them: their first refresh. The result maps each item it tried to
// move to nil (moved) or its error, as takeBackAll's.
func (d *etcdDriver) moveHandedOff(ctx context.Context, items []driver.RefreshItem, keys []string) map[int]error {
	out := map[int]error{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, it := range items {
		s := d.pool.sessionOf(keys[i])
		secs, err := d.leaseSeconds(it.TTL)
		if keys[i] == "" || s == nil || err != nil || s.secs != d.waitSecs() || secs <= s.secs {
			continue
		}
		wg.Go(func() {
			// A key gone or taken over is the lease's end; any other
			// failure (a new lease ended at once, the transport) leaves
			// the key on the wait lease, to move at the next refresh.
			err := d.moveHeld(ctx, keys[i], it.Token, secs)
			if err != nil && !errors.Is(err, driver.ErrNotHeld) {
				err = d.fail(ctx, err)
			}
			mu.Lock()
			out[i] = err
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

// moveHeld puts key, held by token, under the driver's lease of secs,
// its value unchanged, and binds it there.
func (d *etcdDriver) moveHeld(ctx context.Context, key, token string, secs int64) error {
	for retried := false; ; retried = true {
		s, _, err := d.pool.rebind(ctx, key, secs, false)
		if err != nil {
			return err
		}
		err = d.takeBack(ctx, key, token, s.id)
		d.pool.settle(key, s, err == nil)
		if !errors.Is(err, errSessionGone) || retried {
			return err
		}
		// The lease of secs ended since its last renewal: nothing was
		// written. Take a new one, once.
		d.pool.gone(s)
	}
}

// promote makes the waiter's key, now first in line on the wait lease,
// the holder's: its held value under the lease of the lock's TTL, unless
// the key changed since the waiter put it (swept, or gone with its lease):
// then errQueueEntryLost. When etcd's answer is lost the key may be under
// either lease; it stays bound to both until the waiter's clean-up.
func (w *waiter) promote(ctx context.Context) error {
	for retried := false; ; retried = true {
		s, since, err := w.d.pool.rebind(ctx, w.key, w.secs, false)
		if err != nil {
			return err
		}
		err = w.d.claimKey(ctx, w.key, w.rev, w.held, s.id)
		switch {
		case err == nil:
			w.d.pool.settle(w.key, s, true)
			w.sess, w.short, w.since = s, false, since
			return nil
		case errors.Is(err, rpctypes.ErrLeaseNotFound) && !retried:
			// The lock's lease ended since its last renewal: nothing was
			// written. Take a new one, once.
			w.d.pool.settle(w.key, s, false)
			w.d.pool.gone(s)
		case errors.Is(err, errQueueEntryLost), errors.Is(err, rpctypes.ErrLeaseNotFound):
			w.d.pool.settle(w.key, s, false)
			return err
		default:
			return err
		}
	}
}

// renewedLately reports whether s was renewed less than TTL/renewAgeDiv
// ago, and if so records that key, under s, is asked for now and returns
// when that renewal was sent. A renewal by anyone keeps every key under
// the lease alive; many waiters then cost one renewal, not one each.
func (p *pool) renewedLately(s *session, key string) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := s.keys[key]; !ok || s.dead || time.Since(s.since) >= s.ttl/renewAgeDiv {
		return time.Time{}, false
	}
	s.mark(key, time.Now())
	return s.since, true
}
