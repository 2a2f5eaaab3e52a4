package mysqllock

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"time"

	"github.com/dlockdev/dlock/driver"
)

// sweepAge is how long a released name's row is kept, free, before the
// sweep deletes it; sweepEvery is how often a driver sweeps, on a Release.
const (
	sweepAge   = 10 * time.Minute
	sweepEvery = time.Minute
)

// leases is the lease-mode driver: one row per name in the lease table.
//
// A grant is one short transaction: SELECT … FOR UPDATE of the name's
// row, and only when it is free, expired or already the token's, the row
// updated with the next fence (the name's own, kept in its row: see
// grantIn); COMMIT. The alternative, a single INSERT … ON DUPLICATE KEY
// UPDATE whose every assignment repeats the grant condition, was rejected
// for two reasons: MySQL applies the assignments left to right (a later
// one sees the earlier ones' new values, so the condition changes under
// it), and it commits on its own, whenever the server runs it: an attempt
// stalled behind a row lock after its caller gave up would still grant
// the lock to nobody. In a transaction, nothing is granted until the
// caller's COMMIT, which a caller that gave up never sends; its
// connection is closed and the server rolls the attempt back. A loser
// learns the holder from the same locked read. The cost is round trips:
// on a pool that batches statements (batch.go, as dlock.Open makes it)
// two for a grant (START TRANSACTION with the SELECT; the UPDATE with
// COMMIT) and two for a loss (the SELECT; ROLLBACK); one by one, four for
// a grant and three for a loss.
//
// Fences are per name: each grant's is its row's last plus one. A row is
// deleted only after the fence counter (the floor) was raised to its
// fence, and a new row starts from the floor, so a name's fences rise
// even across the sweep.
type leases struct {
	base
	lockRow, beginLockRow, ensureRow string
	grant                            string
	refresh, token, release          string
	sweepMax, raiseFloor, sweep      string
	list, inspect, evict, adoptRead  string
	state                            string

	// keys are the wake keys of the leases held (lease_wake.go).
	keys *wakeKeys

	sweepMu   sync.Mutex
	lastSweep time.Time
}

func newLeases(b base) *leases {
	d := &leases{base: b, keys: newWakeKeys(b.db), lastSweep: time.Now()}
	d.lockRow, d.ensureRow = d.sql(leaseLockRow), d.sql(leaseEnsureRow)
	d.beginLockRow = "START TRANSACTION; " + d.lockRow
	d.grant = d.sql(leaseGrant)
	d.refresh, d.token, d.release = d.sql(leaseRefresh), d.sql(leaseToken), d.sql(leaseRelease)
	d.sweepMax, d.raiseFloor, d.sweep = d.sql(leaseSweepMax), d.sql(leaseRaiseFloor), d.sql(leaseSweep)
	d.list, d.inspect, d.evict, d.adoptRead = d.sql(leaseList), d.sql(leaseInspect), d.sql(leaseEvict), d.sql(leaseAdoptRead)
	d.state = d.sql(leaseState)
	return d
}

var (
	_ driver.Driver            = (*leases)(nil)
	_ driver.Queuer            = (*leases)(nil)
	_ driver.Migrator          = (*leases)(nil)
	_ driver.MigrationReporter = (*leases)(nil)
)

// row is a lease row as leaseLockRow reads it.
type row struct {
	token  sql.NullString
	owner  string
	fence  uint64
	micros int64
}

func (r row) live() bool { return r.token.Valid && r.micros > 0 }

// handedOn reports whether a row that is not live is still kept for the
// holder of its wake key: a holder that kept the key released it (the
// owner is handedOnMark) less than handoffGrace ago. A row freed
// otherwise (expired, force-released, released by a lease without the
// key) is kept for nobody.
func (r row) handedOn() bool {
	return !r.token.Valid && r.owner == handedOnMark && r.micros > -handoffGrace.Microseconds()
}

// handedOnMark is the owner of a row released by a holder of its wake
// key, which the release hands to the first waiter.
const handedOnMark = "\x00handed-on"

// handedOnHolder is whom a refusal names while the row is handed on: the
// waiter woken by the release, for what is left of handoffGrace.
func handedOnHolder(name string, r row) driver.Holder {
	left := time.Duration(r.micros)*time.Microsecond + handoffGrace
	return driver.Holder{Name: name, Owner: "nobody (released, handed to the next waiter)", Fence: r.fence, TTL: left}
}

func (r row) holder(name string) driver.Holder {
	return driver.Holder{Name: name, Owner: r.owner, Fence: r.fence, TTL: time.Duration(r.micros) * time.Microsecond}
}

// TryAcquire makes one attempt (see leases), in turn with the waiters: it
// asks for the name's wake key (lease_wake.go) while it reads the row, on
// another connection at the same time, and without the key grants only a
// row that has been free or expired for handoffGrace. A grant that did
// not need the key keeps the lease even when asking for it failed: the
// row is the lock, and its release then wakes nobody (the waiters find
// the row free by their checks).
func (d *leases) TryAcquire(ctx context.Context, req driver.Request) (driver.Grant, error) {
	took := make(chan keyTake, 1)
	go func() {
		keyed, err := d.keys.takeShared(ctx, d.wakeKey(req.Name), req.Token)
		took <- keyTake{keyed, err}
	}()
	var k keyTake
	var answered bool
	keyed := func() (bool, error) {
		if !answered {
			k, answered = <-took, true
		}
		return k.keyed, k.err
	}
	g, err := d.grantRow(ctx, req, keyed)
	if held, _ := keyed(); held && (err != nil || !g.Acquired) {
		d.keys.giveBy(ctx, req.Token)
	}
	return g, err
}

// keyTake is the answer to a request for a wake key.
type keyTake struct {
	keyed bool
	err   error
}

// withKey and withoutKey are the answers of a caller that knows whether
// it holds the name's wake key.
func withKey() (bool, error)    { return true, nil }
func withoutKey() (bool, error) { return false, nil }

// grantRow makes the grant transaction (see leases). A name without a
// row gets a free one first, committed on its own, and the attempt is
// made on it. keyed says whether the caller holds the name's wake key,
// when the attempt needs to know.
func (d *leases) grantRow(ctx context.Context, req driver.Request, keyed func() (bool, error)) (driver.Grant, error) {
	g, missing, err := d.attempt(ctx, req, keyed)
	if err != nil || !missing {
		return g, err
	}
	if _, err := d.db.ExecContext(ctx, d.ensureRow, req.Name); err != nil {
		return driver.Grant{}, d.classify(err)
	}
	if g, missing, err = d.attempt(ctx, req, keyed); err == nil && missing {
		return driver.Grant{}, d.noCounter() // the row could not be created
	}
	return g, err
}

// attempt is the grant transaction; missing is true when name has no row.
// Without the wake key, a row free or expired for less than handoffGrace
// is refused (see handedOn).
func (d *leases) attempt(ctx context.Context, req driver.Request, keyed func() (bool, error)) (g driver.Grant, missing bool, err error) {
	tx, r, err := d.lockedRead(ctx, req.Name)
	if err != nil {
		return driver.Grant{}, false, d.classify(err)
	}
	defer tx.rollback(ctx)
	switch {
	case r == nil:
		return driver.Grant{}, true, nil
	case r.live() && r.token.String != req.Token:
		return driver.Grant{Holder: r.holder(req.Name)}, false, nil
	case r.token.String != req.Token && r.handedOn():
		held, err := keyed()
		if err != nil {
			return driver.Grant{}, false, d.classify(err)
		}
		if !held {
			return driver.Grant{Holder: handedOnHolder(req.Name, *r)}, false, nil
		}
	}
	fence, err := d.grantIn(ctx, tx, req, *r)
	if err != nil {
		return driver.Grant{}, false, d.classify(err)
	}
	return driver.Grant{Acquired: true, Fence: fence}, false, nil
}

// lockedRead begins the grant's transaction on a pinned connection and
// reads name's row under its row lock, in one message when the pool
// batches; the row is nil when name has none.
func (d *leases) lockedRead(ctx context.Context, name string) (*tx, *row, error) {
	conn, err := d.db.Conn(ctx)
	if err != nil {
		return nil, nil, err
	}
	t := &tx{conn: conn}
	if t.batch, err = d.batching(ctx, conn); err != nil {
		t.discard()
		return nil, nil, err
	}
	q := d.beginLockRow
	if !t.batch {
		q = d.lockRow
		if _, err := conn.ExecContext(ctx, "START TRANSACTION"); err != nil {
			t.discard()
			return nil, nil, err
		}
	}
	var r row
	err = conn.QueryRowContext(ctx, q, name).Scan(&r.token, &r.owner, &r.fence, &r.micros)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return t, nil, nil
	case err != nil:
		t.rollback(ctx)
		return nil, nil, err
	}
	return t, &r, nil
}

// grantIn gives the locked row r to req and commits: with r's fence when
// the row is already req's (a retried attempt whose reply was lost keeps
// its grant's fence), else with the next one. The fence is the name's
// own, in its row, under the row lock the transaction holds: grants of
// different names never wait for one another (a shared counter row,
// locked by every grant until its COMMIT, made them take turns).
func (d *leases) grantIn(ctx context.Context, tx *tx, req driver.Request, r row) (uint64, error) {
	fence := r.fence + 1
	if r.token.Valid && r.token.String == req.Token {
		fence = r.fence
	}
	_, err := tx.commitWith(ctx, step{d.grant, []any{req.Token, req.Owner, fence, req.TTL.Microseconds(), req.Name}})
	return fence, err
}

// drawFence bumps the fence counter inside tx and returns its new value.
func (d *base) drawFence(ctx context.Context, tx interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}) (uint64, error) {
	res, err := tx.ExecContext(ctx, d.draw)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	if err == nil && n != 1 {
		return 0, d.noCounter()
	}
	v, err := res.LastInsertId()
	return uint64(v), err
}

// noCounter is the error of a fence draw that found no counter row.
func (d *base) noCounter() error {
	return &SchemaError{Mode: d.mode, URL: d.url, Err: errors.New("mysqllock: the fence counter has no row")}
}

// Refresh extends token's lease to ttl from now by the database clock. It
// never revives an expired lease.
func (d *leases) Refresh(ctx context.Context, name, token string, ttl time.Duration) error {
	err := d.tokenChecked(ctx, name, token, d.refresh, ttl.Microseconds(), name, token)
	if errors.Is(err, driver.ErrExpired) || errors.Is(err, driver.ErrTakenOver) {
		d.keys.give(ctx, token) // the lease is gone: wake whoever waits
	}
	return err
}

// Release frees token's row. Releasing a lease that expired but was not
// taken over succeeds. An attempt of token still in flight (its caller
// gave up) cannot grant after this: it commits only when its caller says
// so.
func (d *leases) Release(ctx context.Context, name, token string) error {
	if err := d.releaseRow(ctx, name, token); err != nil {
		return err
	}
	d.maybeSweep(ctx)
	return nil
}

// releaseRow frees token's row, then its wake key: in one message on the
// key's connection when the pool batches, else one after the other.
func (d *leases) releaseRow(ctx context.Context, name, token string) error {
	if d.multi.Load() == batchYes {
		n, held, err := d.keys.giveAfter(ctx, token, step{d.release, []any{handedOnMark, name, token}})
		switch {
		case !held:
		case err != nil:
			return d.classify(err)
		case n == 1:
			return nil
		default:
			return d.whyNot(ctx, name, token)
		}
	}
	mark := ""
	if d.keys.holding(token) {
		mark = handedOnMark
	}
	err := d.tokenChecked(ctx, name, token, d.release, mark, name, token)
	d.keys.give(ctx, token) // after the row: the woken waiter finds it free
	return err
}

// tokenChecked runs a token-checked statement that changes one row; when
// it changed none, a read of the row's token says why.
func (d *leases) tokenChecked(ctx context.Context, name, token, stmt string, args ...any) error {
	res, err := d.db.ExecContext(ctx, stmt, args...)
	if err != nil {
		return d.classify(err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 1 {
		return err
	}
	return d.whyNot(ctx, name, token)
}

// whyNot says why token does not hold name.
func (d *leases) whyNot(ctx context.Context, name, token string) error {
	var current sql.NullString
	err := d.db.QueryRowContext(ctx, d.token, name).Scan(&current)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return d.classify(err)
	}
	return notHeld(token, current)
}

// notHeld says why token does not hold a row whose token is current.
func notHeld(token string, current sql.NullString) error {
	if !current.Valid || current.String == token {
		return driver.ErrExpired
	}
	return driver.ErrTakenOver
}

// maybeSweep deletes old free rows, at most once per sweepEvery per
// driver; a failure is left for the next sweep.
func (d *leases) maybeSweep(ctx context.Context) {
	d.sweepMu.Lock()
	due := time.Since(d.lastSweep) >= sweepEvery
	if due {
		d.lastSweep = time.Now()
	}
	d.sweepMu.Unlock()
	if due {
		_ = d.sweepOld(ctx, sweepAge)
	}
}

// sweepOld deletes the rows free for longer than age, after raising the
// fence floor to their highest fence (see leaseSweep).
func (d *leases) sweepOld(ctx context.Context, age time.Duration) error {
	var top uint64
	if err := d.db.QueryRowContext(ctx, d.sweepMax, age.Microseconds()).Scan(&top); err != nil {
		return d.classify(err)
	}
	if top == 0 {
		return nil
	}
	if _, err := d.db.ExecContext(ctx, d.raiseFloor, top); err != nil {
		return d.classify(err)
	}
	_, err := d.db.ExecContext(ctx, d.sweep, age.Microseconds(), top)
	return d.classify(err)
}

// Close frees the wake keys left, and closes the pool when it was opened
// from a URL.
func (d *leases) Close() error {
	d.keys.close()
	return d.close()
}
