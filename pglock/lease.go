package pglock

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/dlockdev/dlock/driver"
)

// tombstoneAge is how long a released name's row is kept, remembering
// the tokens released on it, before the sweep deletes it: an attempt the
// server runs longer than this after its caller gave up can still grant
// a lease nobody holds (until its TTL), as before this safeguard.
const tombstoneAge = 10 * time.Minute

// sweepEvery is how often a driver sweeps old tombstones, on a Release.
const sweepEvery = time.Minute

// leases is the lease-mode driver: one row per name in the lease table,
// each operation one statement.
type leases struct {
	base
	listener                                                           *listener
	acquire, acquireWait, refresh, release, refreshBatch, releaseBatch string
	list, inspect, forceRelease, sweep                                 string

	sweepMu   sync.Mutex
	lastSweep time.Time
}

func newLeases(b base) *leases {
	d := &leases{base: b, listener: newListener(b.pool, b.channel), lastSweep: time.Now()}
	d.acquire, d.refresh, d.release = d.sql(strings.Replace(leaseAcquire, "{{queue}}", queueTry, 1)), d.sql(leaseRefresh), d.sql(leaseRelease)
	d.acquireWait = d.sql(strings.Replace(leaseAcquire, "{{queue}}", queueWait, 1))
	d.refreshBatch, d.list, d.inspect = d.sql(leaseRefreshBatch), d.sql(leaseList), d.sql(leaseInspect)
	d.forceRelease, d.sweep, d.releaseBatch = d.sql(leaseForceRelease), d.sql(leaseSweep), d.sql(leaseReleaseBatch)
	return d
}

// errReleasedToken answers an attempt whose token was already released:
// the caller gave up on it, and it must grant nothing.
var errReleasedToken = errors.New("pglock: this attempt's token was already released (its Acquire gave up)")

// TryAcquire makes one attempt: one statement that grants, or names the
// holder under the row lock. It always returns a row, so a Grant with
// Acquired false always describes a live holder the database saw.
func (d *leases) TryAcquire(ctx context.Context, req driver.Request) (driver.Grant, error) {
	return d.attempt(ctx, req, d.acquire)
}

func (d *leases) attempt(ctx context.Context, req driver.Request, stmt string) (driver.Grant, error) {
	var (
		won, dead     bool
		fence, micros int64
		owner         string
	)
	err := d.pool.QueryRow(ctx, stmt, req.Name, req.Token, req.Owner, req.TTL.Microseconds()).
		Scan(&won, &fence, &owner, &micros, &dead)
	switch {
	case err != nil:
		return driver.Grant{}, d.classify(err)
	case won:
		return driver.Grant{Acquired: true, Fence: uint64(fence)}, nil
	case dead:
		return driver.Grant{}, errReleasedToken
	}
	return driver.Grant{Holder: holder(req.Name, owner, fence, micros)}, nil
}

func holder(name, owner string, fence, micros int64) driver.Holder {
	ttl := time.Duration(-1)
	if micros >= 0 {
		ttl = time.Duration(micros) * time.Microsecond
	}
	return driver.Holder{Name: name, Owner: owner, Fence: uint64(fence), TTL: ttl}
}

// Refresh extends token's lease to ttl from now by the database clock. It
// never revives an expired lease.
func (d *leases) Refresh(ctx context.Context, name, token string, ttl time.Duration) error {
	var (
		ok      bool
		current *string
	)
	if err := d.pool.QueryRow(ctx, d.refresh, name, token, ttl.Microseconds()).Scan(&ok, &current); err != nil {
		return d.classify(err)
	}
	if ok {
		return nil
	}
	return notHeld(token, current)
}

// notHeld says why token does not hold a row whose token is current.
func notHeld(token string, current *string) error {
	if current == nil || *current == token {
		return driver.ErrExpired
	}
	return driver.ErrTakenOver
}

// Release frees token's row and records token as released on the name,
// so that an attempt of token still running on the server (its caller
// gave up) grants nothing; it notifies waiters when an attempt found the
// lock held. Releasing a lease that expired but was not taken over
// succeeds.
func (d *leases) Release(ctx context.Context, name, token string) error {
	var (
		ok      bool
		current *string
		n       int64
	)
	if err := d.pool.QueryRow(ctx, d.release, name, token, d.channel).Scan(&ok, &current, &n); err != nil {
		return d.classify(err)
	}
	d.maybeSweep(ctx)
	if ok {
		return nil
	}
	return notHeld(token, current)
}

// maybeSweep deletes old tombstones, at most once per sweepEvery per
// driver; a failure is left for the next sweep.
func (d *leases) maybeSweep(ctx context.Context) {
	d.sweepMu.Lock()
	due := time.Since(d.lastSweep) >= sweepEvery
	if due {
		d.lastSweep = time.Now()
	}
	d.sweepMu.Unlock()
	if due {
		_, _ = d.pool.Exec(ctx, d.sweep, tombstoneAge.Microseconds())
	}
}

// maxPoll bounds a waiter's sleep between attempts when no notification
// comes (the holder expired, the listening connection is down, or the
// waiter was left out of a full queue).
const maxPoll = 250 * time.Millisecond

// AcquireWait (driver.Queuer) waits for the lock in the row's queue: an
// attempt that loses appends its token to the row's waiters, and each
// release notifies the head of the queue alone, by its token, on the
// table's channel (one waiter woken, not the herd). The waiter retries
// when notified, when the holder's lease runs out (expiry notifies
// nobody), or every maxPoll; it leaves the queue when it wins, or, when
// ctx ends, by the Release the portable layer makes for the abandoned
// attempt. Grant.Since is the sent time of the winning attempt, from
// which its lease counts.
func (d *leases) AcquireWait(ctx context.Context, req driver.Request) (driver.Grant, error) {
	woken, stop, err := d.listener.Watch(ctx, req.Token)
	if err != nil {
		woken, stop = nil, func() {} // poll
	}
	defer stop()
	t := time.NewTimer(0)
	defer t.Stop()
	<-t.C
	for {
		sent := time.Now()
		g, err := d.attempt(ctx, req, d.acquireWait)
		if err != nil || g.Acquired {
			g.Since = sent
			return g, err
		}
		t.Reset(pollAfter(g.Holder))
		select {
		case <-woken:
		case <-t.C:
		case <-ctx.Done():
			return g, ctx.Err()
		}
	}
}

// pollAfter is how long a waiter sleeps when not notified: until the
// holder's lease runs out, at most maxPoll.
func pollAfter(h driver.Holder) time.Duration {
	if h.TTL >= 0 && h.TTL+time.Millisecond < maxPoll {
		return h.TTL + time.Millisecond
	}
	return maxPoll
}

// Close stops the listener, and closes the pool when it was opened from a
// URL.
func (d *leases) Close() error {
	d.listener.close()
	return d.close()
}

// Migrate creates the lease table and the fence sequence, or upgrades an
// earlier version's table (see leaseDDL).
func (d *leases) Migrate(ctx context.Context) error { return d.migrate(ctx, leaseDDL...) }
