package mysqllock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/internal/recent"
)

// sweepAge is how long a released name's row is kept, free, before the
// sweep deletes it; sweepEvery is how often a driver sweeps, on a Release.
const (
	sweepAge   = 10 * time.Minute
	sweepEvery = time.Minute
)

// leases is the lease-mode driver: one row per name in the lease table.
//
// A grant is one message (lease_take.go): one autocommitted UPDATE that
// gives the row to the token only when it is free, expired or already
// the token's, with the row's next fence, and that refuses once the
// caller's deadline has passed by the database clock, so that an attempt
// the server runs after its caller gave up grants nothing; then a read of
// the row, which names the holder to a loser. On a pool that batches
// statements (batch.go, as dlock.Open makes it) it is one round trip, and
// a release one more; one statement at a time, a grant is four.
//
// Fences are per name: each grant's is its row's last plus one. A row is
// deleted only after the fence counter (the floor) was raised to its
// fence, and a new row starts from the floor, so a name's fences rise
// even across the sweep.
type leases struct {
	base
	lockRow, ensureRow              string
	takeMaria, takeMySQL            string
	took, keyBack                   string
	tookKey, keyBackVar             string
	refresh, token, release         string
	sweepMax, raiseFloor, sweep     string
	list, inspect, evict, adoptRead string
	state                           string

	// keys are the wake keys of the leases held (lease_wake.go).
	keys *wakeKeys
	// clock bounds the database clock's offset, for the deadline a
	// grant carries (lease_take.go); flavor is the server's kind, which
	// picks the grant statement.
	clock  serverClock
	flavor atomic.Int32
	// recent are the names this driver's waits found held lately.
	recent *recent.Names
	// queueTook is queueTook's SQL for this driver's table.
	queueTook string

	sweepMu   sync.Mutex
	lastSweep time.Time
}

func newLeases(b base) *leases {
	d := &leases{base: b, keys: newWakeKeys(b.db), lastSweep: time.Now(), recent: recent.New(contendedFor, contendedMost)}
	d.lockRow, d.ensureRow = d.sql(leaseLockRow), d.sql(leaseEnsureRow)
	take := d.sql(leaseTake)
	d.takeMaria = takeMariaDB + strings.Replace(take, "{{clock}}", clockMariaDB, 1)
	d.takeMySQL = strings.Replace(take, "{{clock}}", clockMySQL, 1)
	d.took, d.keyBack = d.sql(leaseTook), d.sql(leaseKeyBack)
	d.tookKey, d.keyBackVar = d.sql(leaseTookKey), d.sql(leaseKeyBackVar)
	d.refresh, d.token, d.release = d.sql(leaseRefresh), d.sql(leaseToken), d.sql(leaseRelease)
	d.sweepMax, d.raiseFloor, d.sweep = d.sql(leaseSweepMax), d.sql(leaseRaiseFloor), d.sql(leaseSweep)
	d.list, d.inspect, d.evict, d.adoptRead = d.sql(leaseList), d.sql(leaseInspect), d.sql(leaseEvict), d.sql(leaseAdoptRead)
	d.state, d.queueTook = d.sql(leaseState), d.sql(queueTook)
	return d
}

var (
	_ driver.Driver            = (*leases)(nil)
	_ driver.Queuer            = (*leases)(nil)
	_ driver.Migrator          = (*leases)(nil)
	_ driver.MigrationReporter = (*leases)(nil)
)

// row is a lease row as leaseLockRow reads it; granted is the rows
// leaseTake changed, as leaseTook reads it.
type row struct {
	token   sql.NullString
	owner   string
	fence   uint64
	micros  int64
	granted int64
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

// TryAcquire makes one attempt (see leases and lease_take.go) on the
// shared connection of the name's wake key, asking for the key in the
// same message: the key decides whether a row just released by a holder
// of the key (handedOn) may be granted, and a lease granted with it keeps
// it on that connection until its release.
func (d *leases) TryAcquire(ctx context.Context, req driver.Request) (driver.Grant, error) {
	key := d.wakeKey(req.Name)
	sh := d.keys.shard(key)
	return d.grantLoop(ctx, req, func() (took, error) {
		sh.mu.Lock()
		defer sh.mu.Unlock()
		conn, ask, err := d.keys.shardConn(ctx, sh, key, req.Token)
		if err != nil {
			return took{}, err
		}
		t, err := d.grantMsg(ctx, conn, req, ask)
		switch {
		case err != nil && (!busy(err) || errors.Is(err, errKeyKept)):
			d.keys.dropShared(sh)
		case err == nil && t.got:
			d.keys.record(sh, key, req.Token)
		}
		return t, err
	})
}

// grantOn makes one attempt on conn, a waiter's connection that holds
// the name's wake key, or (conn nil) on a connection from the pool, which
// holds no key.
func (d *leases) grantOn(ctx context.Context, conn *sql.Conn, req driver.Request) (driver.Grant, error) {
	return d.grantLoop(ctx, req, func() (took, error) {
		c := conn
		if c == nil {
			var err error
			if c, err = d.db.Conn(ctx); err != nil {
				return took{}, err
			}
			defer func() { _ = c.Close() }()
		}
		return d.grantMsg(ctx, c, req, "")
	})
}

// grantLoop runs msg, a grant message, while the row is busy (whileBusy),
// creating the name's row (free) first when it has none, and reads the
// outcome.
func (d *leases) grantLoop(ctx context.Context, req driver.Request, msg func() (took, error)) (driver.Grant, error) {
	g, err := whileBusy(ctx, func() (driver.Grant, error) {
		for created := false; ; created = true {
			t, err := msg()
			switch {
			case err != nil:
				return driver.Grant{}, err
			case t.row == nil && created:
				return driver.Grant{}, d.noCounter() // the row could not be created
			case t.row == nil:
				if _, err := d.db.ExecContext(ctx, d.ensureRow, req.Name); err != nil {
					return driver.Grant{}, err
				}
				continue
			}
			return d.outcome(ctx, req, t)
		}
	})
	switch cerr := ctx.Err(); {
	case err == nil || cerr == nil || errors.Is(err, cerr):
	case errors.Is(err, errNotGranted):
		err = cerr
	default:
		// The caller gave up first: what failed after that (a connection
		// the driver closed as the context ended reports itself bad) is
		// the deadline's doing.
		err = fmt.Errorf("%w (%v)", cerr, err)
	}
	return g, d.classify(err)
}

// outcome is the Grant a grant message's reply says.
func (d *leases) outcome(ctx context.Context, req driver.Request, t took) (driver.Grant, error) {
	r := *t.row
	switch {
	case t.granted:
		return driver.Grant{Acquired: true, Fence: r.fence}, nil
	case r.live() && r.token.String != req.Token:
		return driver.Grant{Holder: r.holder(req.Name)}, nil
	case r.token.String != req.Token && r.handedOn():
		return driver.Grant{Holder: handedOnHolder(req.Name, r)}, nil
	case ctx.Err() != nil:
		return driver.Grant{}, ctx.Err()
	}
	// Refused by the deadline guard, a few µs early (its offset errs
	// early), or the row changed between the statements: again.
	return driver.Grant{}, errNotGranted
}

// errNotGranted is a grant refused for no reason its reply shows: tried
// again while the row is busy (busy), then returned.
var errNotGranted = errors.New("mysqllock: the grant was refused by the database clock's deadline guard, or its row changed under it, for a second")

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
