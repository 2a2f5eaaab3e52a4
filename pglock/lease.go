package pglock

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/internal/coalesce"
	"github.com/dlockdev/dlock/internal/recent"
	"github.com/jackc/pgx/v5"
)

// tombstoneAge is how long a released name's row is kept, remembering
// the tokens released on it, before the sweep deletes it: an attempt the
// server runs longer than this after its caller gave up can still grant
// a lease nobody holds (until its TTL), as before this safeguard.
const tombstoneAge = 10 * time.Minute

// sweepEvery is how often a driver sweeps old tombstones, on a Release.
const sweepEvery = time.Minute

// contendedFor is how long a name is taken to be contended after this
// driver's wait queued on it or its release found waiters (see
// leaseReleaseHandOff); contendedMost bounds the names remembered.
const (
	contendedFor  = 10 * time.Second
	contendedMost = 4096
)

// leases is the lease-mode driver: one row per name in the lease table,
// each operation one statement.
type leases struct {
	base
	listener                                  *listener
	wake                                      string // the driver's own NOTIFY channel (wake.go)
	acquire, acquireInTurn, holder            string
	refresh, release, releaseHandOff          string
	tombstone                                 string
	refreshBatch, releaseBatch, list, inspect string
	forceRelease, sweep, tokens               string
	acquireManySQL, releaseManySQL            string
	acquireInTurnManySQL                      string

	// tries, turns (waiters' attempts) and releases coalesce the calls
	// of d's goroutines (lease_coalesce.go).
	tries    *coalesce.Batcher[*tryCall]
	turns    *coalesce.Batcher[*turnCall]
	releases *coalesce.Batcher[*releaseCall]

	// recent are the names this driver saw contended lately: its waits
	// queued on them, or its releases found waiters. Their releases hand
	// the lock over (leaseReleaseHandOff).
	recent *recent.Names
	// clock estimates the database clock, for waiters' deadlines.
	clock dbClock

	sweepMu   sync.Mutex
	lastSweep time.Time

	// sleepHook, when set (by tests), is told each sleep of a queued
	// waiter between attempts, and the reservation it found (-1: none).
	sleepHook func(reserved, sleep time.Duration)
}

func newLeases(b base) *leases {
	wake := newWakeChannel()
	d := &leases{base: b, wake: wake, listener: newListener(b.pool, b.channel, wake, b.evicted), lastSweep: time.Now(),
		recent: recent.New(contendedFor, contendedMost)}
	d.listener.onClock = d.clock.sample
	d.acquire, d.acquireInTurn, d.holder = d.sql(leaseAcquire), d.sql(leaseAcquireInTurn), d.sql(leaseHolder)
	d.refresh, d.release, d.tombstone = d.sql(leaseRefresh), d.sql(leaseRelease), d.sql(leaseTombstone)
	d.releaseHandOff = d.sql(leaseReleaseHandOff)
	d.refreshBatch, d.list, d.inspect = d.sql(leaseRefreshBatch), d.sql(leaseList), d.sql(leaseInspect)
	d.forceRelease, d.sweep, d.releaseBatch = d.sql(leaseForceRelease), d.sql(leaseSweep), d.sql(leaseReleaseBatch)
	d.tokens, d.acquireManySQL, d.releaseManySQL = d.sql(leaseTokens), d.sql(leaseAcquireMany), d.sql(leaseReleaseMany)
	d.acquireInTurnManySQL = d.sql(leaseAcquireInTurnMany)
	d.newBatchers()
	return d
}

// errReleasedToken answers an attempt whose token was already released:
// the caller gave up on it, and it must grant nothing.
var errReleasedToken = errors.New("pglock: this attempt's token was already released (its Acquire gave up)")

// errUnsettled reports a lock that kept changing hands between an
// attempt and the look-up of its holder: neither granted nor held.
var errUnsettled = errors.New("pglock: the lock changed hands repeatedly during the attempt; try again")

// maxRounds bounds the attempts of one TryAcquire when the lock is freed
// between an attempt and the look-up of its holder.
const maxRounds = 3

// TryAcquire makes one attempt: the grant statement, and only when it
// loses, a look-up of the holder. A Grant with Acquired false is returned
// only when the look-up found another live lease on the name; a lock
// freed in between is attempted again.
func (d *leases) TryAcquire(ctx context.Context, req driver.Request) (driver.Grant, error) {
	for range maxRounds {
		g, won, err := d.try(ctx, req)
		if err != nil || won {
			return g, err
		}
		h, held, err := d.holderOf(ctx, req)
		if err != nil || held {
			return driver.Grant{Holder: h}, err
		}
	}
	return driver.Grant{}, errUnsettled
}

// grant runs the grant statement; won is false when it did not grant.
func (d *leases) grant(ctx context.Context, req driver.Request, stmt string) (driver.Grant, bool, error) {
	var fence int64
	err := d.pool.QueryRow(ctx, stmt, req.Name, req.Token, req.Owner, req.TTL.Microseconds()).Scan(&fence)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return driver.Grant{}, false, nil
	case err != nil:
		return driver.Grant{}, false, d.classify(err)
	}
	return driver.Grant{Acquired: true, Fence: uint64(fence)}, true, nil
}

// holderOf reads the row after a losing attempt: held is true when
// another live lease holds it.
func (d *leases) holderOf(ctx context.Context, req driver.Request) (driver.Holder, bool, error) {
	var (
		token         *string
		owner         string
		fence, micros int64
		dead          bool
	)
	err := d.pool.QueryRow(ctx, d.holder, req.Name, req.Token).Scan(&token, &owner, &fence, &micros, &dead)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return driver.Holder{}, false, nil
	case err != nil:
		return driver.Holder{}, false, d.classify(err)
	case dead:
		return driver.Holder{}, false, errReleasedToken
	case token == nil || *token == req.Token || micros <= 0:
		return driver.Holder{}, false, nil // free, expired, or ours: attempt again
	}
	return holder(req.Name, owner, fence, micros), true, nil
}

// attemptInTurn makes a waiter's attempt (leaseAcquireInTurn): it grants
// the lock, or puts req's token in the row's queue when another live
// lease holds it or the lock is reserved for another waiter, and returns
// that holder; queued is false when it did neither (the lock is free
// again, or req's token was released). reserved is how long the other
// waiter's reservation lasts when the lock is in hand-over, -1 otherwise.
// When the attempt returned a row, at becomes its sent time and the
// database time it ran at.
func (d *leases) attemptInTurn(ctx context.Context, req driver.Request, elem string, at *driver.Turn) (g driver.Grant, h driver.Holder, queued bool, reserved time.Duration, err error) {
	c := &turnCall{ctx: ctx, req: req, elem: elem}
	switch {
	case !d.turns.Do(ctx, c):
		return driver.Grant{}, driver.Holder{}, false, -1, d.classify(ctx.Err())
	case c.err != nil:
		return driver.Grant{}, driver.Holder{}, false, -1, d.classify(c.err)
	case !c.answered:
		return driver.Grant{}, driver.Holder{}, false, -1, nil
	}
	*at = driver.Turn{Sent: c.sent, Ran: c.ran}
	d.clock.sample(c.sent, c.ran)
	if c.won {
		return driver.Grant{Acquired: true, Fence: uint64(c.fence)}, driver.Holder{}, false, -1, nil
	}
	reserved = -1
	if c.reserved >= 0 {
		reserved = time.Duration(c.reserved) * time.Microsecond
	}
	return driver.Grant{}, holder(req.Name, c.owner, c.fence, c.micros), true, reserved, nil
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

// Release frees token's row, records token as released on the name,
// and hands the lock to the head of the queue of waiters when the name
// was contended lately (leaseReleaseHandOff), else reserves it for the
// head and wakes it (leaseRelease); a release that finds waiters marks
// the name contended. When token does not hold the row, a second
// statement records it as released anyway (creating the row if need be,
// and freeing what a still-running attempt of token grants), so that an
// attempt the server runs after its caller gave up grants nothing.
// Releasing a lease that expired but was not taken over succeeds. The
// plain releases of several goroutines at the same moment share one
// statement (lease_coalesce.go).
func (d *leases) Release(ctx context.Context, name, token string) error {
	if d.recent.Lately(name) {
		return d.releaseBy(ctx, d.releaseHandOff, name, token)
	}
	c := &releaseCall{ctx: ctx, name: name, token: token}
	if !d.releases.Do(ctx, c) {
		return d.classify(ctx.Err())
	}
	return c.err
}

// releaseBy releases token's lease on name with stmt (leaseRelease or
// leaseReleaseHandOff), alone.
func (d *leases) releaseBy(ctx context.Context, stmt, name, token string) error {
	var next, notified *string
	err := d.pool.QueryRow(ctx, stmt, name, token, d.channel).Scan(&next, &notified)
	if err == nil {
		if notified != nil {
			d.recent.Saw(name) // someone waits: hand over next time
		}
		d.maybeSweep(ctx)
		return nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return d.classify(err)
	}
	return d.notReleased(ctx, name, token)
}

// notReleased records token as released on name, whose row it did not
// hold, and says why it did not.
func (d *leases) notReleased(ctx context.Context, name, token string) error {
	var current, woken *string
	if err := d.pool.QueryRow(ctx, d.tombstone, name, token, d.channel).Scan(&current, &woken); err != nil {
		return d.classify(err)
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

// AcquireWait (driver.Queuer) waits for the lock in the row's queue: a
// losing attempt appends its token to the row's waiters, in the same
// statement (leaseAcquireInTurn), and each release notifies the head of
// the queue alone, by its token, on its driver's wake channel (one waiter
// woken, not the herd, and one listening connection: see wake.go). The
// waiter retries when notified, when the holder's lease runs out (expiry
// notifies nobody), or every maxPoll; it leaves the queue when it wins,
// or, when ctx ends, by the Release the portable layer makes for the
// abandoned attempt. Grant.Since is the sent time of the winning attempt,
// from which its lease counts.
//
// Most grants under contention come with no attempt at all: a release
// hands the lock to the head of the queue in its own statement (see
// leaseReleaseHandOff), and the notification says so. That grant is
// provisional (Grant.Window) and counts from the database time of the
// hand-off, mapped to this host's clock through the waiter's last
// attempt (driver.Turn).
func (d *leases) AcquireWait(ctx context.Context, req driver.Request) (driver.Grant, error) {
	woken, stop, err := d.listener.Watch(ctx, req.Token)
	if err != nil {
		woken, stop = nil, func() {} // poll
	}
	defer stop()
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	var (
		last driver.Holder
		at   driver.Turn
		elem = d.element(ctx, req) // after Watch: the listener read the database clock
	)
	for {
		g, h, queued, reserved, err := d.attemptInTurn(ctx, req, elem, &at)
		if err != nil {
			return driver.Grant{Holder: last}, err
		}
		if g.Acquired {
			g.Since = at.Sent
			return g, nil
		}
		if !queued { // free again, expired, or released: ask why
			if h, _, err = d.holderOf(ctx, req); err != nil {
				return driver.Grant{Holder: last}, err
			}
		}
		if h.Name != "" {
			last = h
		}
		if queued {
			d.recent.Saw(req.Name)
		}
		sleep := pollBehind(pollAfter(h, queued), reserved)
		if d.sleepHook != nil {
			d.sleepHook(reserved, sleep)
		}
		t.Reset(sleep)
		select {
		case msg := <-woken:
			if g, ok := handOff(msg, at); ok {
				return g, nil
			}
		case <-t.C:
		case <-ctx.Done():
			return driver.Grant{Holder: last}, ctx.Err()
		}
	}
}

// pollAfter is how long a waiter sleeps when not notified: until the
// holder's lease runs out, at most maxPoll; not at all when it did not
// queue. A waiter's attempt queues it whenever the lock is held or
// reserved for another, so a waiter left out found the lock free (or its
// own) at that moment; if someone took it since (holderOf says so), the
// waiter attempts again and joins then, instead of sleeping maxPoll
// outside the queue (a 250 ms stall now and then under contention).
func pollAfter(h driver.Holder, queued bool) time.Duration {
	switch {
	case !queued:
		return 0
	case h.TTL >= 0 && h.TTL+time.Millisecond < maxPoll:
		return h.TTL + time.Millisecond
	}
	return maxPoll
}

// pollBehind shortens a queued waiter's sleep to the reservation's
// remaining time when the lock is in hand-over, reserved for another
// waiter (reserved is -1 otherwise): nobody is notified when a
// reservation lapses (its waiter died, or gave up without its Release
// reaching the server), so the waiters queued behind it attempt again
// then, instead of sleeping maxPoll.
func pollBehind(poll, reserved time.Duration) time.Duration {
	if reserved >= 0 {
		return min(poll, reserved+time.Millisecond)
	}
	return poll
}

// Close stops the listener, and closes the pool when it was opened from a
// URL.
func (d *leases) Close() error {
	d.listener.close()
	return d.close()
}

// Migrate creates the lease table, the fence sequence and the run
// ledger's tables, or upgrades an earlier version's schema (see
// leaseDDL).
func (d *leases) Migrate(ctx context.Context) error {
	_, err := d.MigrateReport(ctx)
	return err
}

// MigrateReport (driver.MigrationReporter) is Migrate, returning what it
// created: the sequence and the tables, or what an upgrade added (columns
// of the lease table, the run ledger's tables); none when the schema was
// up to date.
func (d *leases) MigrateReport(ctx context.Context) ([]string, error) {
	return d.migrate(ctx, leaseObjects, leaseDDL...)
}
