package mysqllock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlockdev/dlock/driver"
)

// getLocks is the get_lock-mode driver: each held lock is a GET_LOCK on a
// connection pinned for the life of the lease (a session).
//
// Waiters (driver.Queuer) block in the server, in GET_LOCK with the
// caller's remaining time as its timeout: a waiter that gave up, even one
// whose process is stopped and cannot close its connection, stops
// waiting in the server at its deadline and never gets the lock after.
//
// A dropped connection is seen by a monitor: while any lock is held, one
// goroutine per driver asks every monitorEvery, in one statement on a
// pool connection, whether each held key is still taken by its session's
// connection (IS_USED_LOCK), and ends the sessions whose connection lost
// it (killed, server restarted), at once calling the portable layer's
// lost callback (driver.SessionWatcher). database/sql gives no way to
// read an idle pinned connection, which is how pglock's advisory mode
// sees a closed socket; polling by one statement for all held locks is
// the price.
type getLocks struct {
	base
	publish, holderQ, list, inspect string
	trySeq, publishSeq, trySeqBatch string
	tryOne                          string
	nextFence, sweep                string
	lastSweep                       atomic.Int64 // the monitor's last sweep, in Unix ns

	flavor   atomic.Int32 // the server's kind (isMariaDB)
	mu       sync.Mutex
	sessions map[string]*glSession // by token
	stopMon  context.CancelFunc    // the running monitor's; nil when none runs
	monitors sync.WaitGroup        // every monitor started, until it returns
}

// monitorEvery is how often the monitor checks the held locks.
const monitorEvery = 100 * time.Millisecond

// glSession is one held GET_LOCK.
type glSession struct {
	mu     sync.Mutex // one statement at a time on conn
	conn   *sql.Conn
	connID atomic.Uint64 // the connection's server id; 0 until the monitor learns it (glTryOne)
	name   string
	key    string
	fence  uint64
	ended  bool
	lost   func()
}

func newGetLocks(b base) *getLocks {
	d := &getLocks{base: b, sessions: map[string]*glSession{}}
	d.publish, d.holderQ = d.sql(glPublish), d.sql(glHolder)
	d.trySeq, d.publishSeq = d.sql(glTrySeq), d.sql(glPublishSeq)
	d.trySeqBatch = d.trySeq + "; " + d.publishSeq
	d.tryOne = d.sql(glTryOne)
	d.nextFence, d.sweep = d.sql(glNextFence), d.sql(glSweep)
	d.list, d.inspect = d.sql(glList), d.sql(glInspect)
	return d
}

var (
	_ driver.Queuer            = (*getLocks)(nil)
	_ driver.SessionWatcher    = (*getLocks)(nil)
	_ driver.Describer         = (*getLocks)(nil)
	_ driver.Lister            = (*getLocks)(nil)
	_ driver.ForceReleaser     = (*getLocks)(nil)
	_ driver.MigrationReporter = (*getLocks)(nil)
)

// Capabilities: session-bound, and no adoption.
func (d *getLocks) Capabilities() driver.Capabilities {
	return driver.Capabilities{
		SessionBound: true,
		AdoptWhyNot:  "a GET_LOCK lock is held by the connection that took it: no other connection can take it over",
	}
}

// TryAcquire makes one attempt: GET_LOCK with no wait.
func (d *getLocks) TryAcquire(ctx context.Context, req driver.Request) (driver.Grant, error) {
	return d.attempt(ctx, req, 0)
}

// waitMargin is how long before the caller's deadline a wait in the
// server ends (AcquireWait).
const waitMargin = 100 * time.Millisecond

// holderAskTimeout bounds the question "who holds it?" after a wait
// ended with its context: a stopped server must not keep a caller that
// gave up waiting. A server that answers does so in about a millisecond;
// with 250 ms, 3,618 of 4,000 waiters on a stopped server returned 251 ms
// past their deadlines (the fault suite's S8b).
const holderAskTimeout = 50 * time.Millisecond

// AcquireWait waits in the server, in GET_LOCK, until ctx's deadline (a
// year without one); the end of ctx closes the connection.
func (d *getLocks) AcquireWait(ctx context.Context, req driver.Request) (driver.Grant, error) {
	wait := float64(365 * 24 * 3600)
	if dl, ok := ctx.Deadline(); ok {
		// The server's wait ends waitMargin before the caller's deadline,
		// so that its "not granted" arrives while the caller still
		// listens. A grant the caller no longer listens for closes the
		// connection, and the lock stays taken until the server notices
		// (milliseconds, seen as a lock "held by connection N" after its
		// holder released it).
		wait = math.Max(0, (time.Until(dl) - waitMargin).Seconds())
	}
	g, err := d.attempt(ctx, req, wait)
	switch {
	case err == nil && g.Acquired:
		return g, nil
	case err == nil:
		return g, context.DeadlineExceeded // the server's timeout: the caller's deadline
	case ctx.Err() == nil:
		return g, err
	}
	// The wait ended with ctx (its connection closed): say who holds it.
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), holderAskTimeout)
	defer cancel()
	h, herr := d.holderOf(hctx, req.Name)
	if herr != nil || h.Owner == "" {
		h = driver.Holder{}
	}
	return driver.Grant{Holder: h}, ctx.Err()
}

// attempt takes a pool connection and calls GET_LOCK on it, waiting up
// to wait seconds; on success it draws a fence, publishes the holder and
// pins the connection.
func (d *getLocks) attempt(ctx context.Context, req driver.Request, wait float64) (driver.Grant, error) {
	if s := d.session(req.Token); s != nil { // a retried attempt whose reply was lost
		return driver.Grant{Acquired: true, Fence: s.fence}, nil
	}
	conn, err := d.db.Conn(ctx)
	if err != nil {
		return driver.Grant{}, d.classify(err)
	}
	key := Key(req.Name)
	maria, err := isMariaDB(ctx, conn, &d.flavor)
	if err != nil {
		_ = conn.Close()
		return driver.Grant{}, d.classify(err)
	}
	fence, connID, err := d.grant(ctx, conn, req, key, wait, maria)
	if err != nil {
		// Closed for good: the key may be held on it.
		_ = conn.Raw(func(any) error { return errBadConn })
		_ = conn.Close()
		return driver.Grant{}, d.classify(err)
	}
	if fence == 0 {
		_ = conn.Close()
		h, err := d.holderOf(ctx, req.Name)
		return driver.Grant{Holder: h}, err
	}
	// The lease counts from the grant, not from the start of a wait in
	// the server (Grant.Since): the lock is the session's, the TTL only
	// the health check's cadence.
	since := time.Now()
	s := &glSession{conn: conn, name: req.Name, key: key, fence: fence}
	s.connID.Store(connID)
	d.pin(req.Token, s)
	return driver.Grant{Acquired: true, Fence: fence, Since: since}, nil
}

// holderOf describes name's holder after a refused GET_LOCK; a lock freed
// in between is reported as held by nobody known (Holder.Name set, so
// the refusal is a conflict, not an outage).
func (d *getLocks) holderOf(ctx context.Context, name string) (driver.Holder, error) {
	var (
		id    sql.NullInt64
		owner sql.NullString
		fence sql.NullInt64
	)
	if err := d.db.QueryRowContext(ctx, d.holderQ, Key(name)).Scan(&id, &owner, &fence); err != nil {
		return driver.Holder{}, d.classify(err)
	}
	return describe(name, id, owner, fence), nil
}

// describe is the holder of name's key: the connection id holds it, with
// its published owner and fence when it has a row (a holder without one
// is named by its connection); the key free (id NULL) is a holder nobody
// knows.
func describe(name string, id sql.NullInt64, owner sql.NullString, fence sql.NullInt64) driver.Holder {
	h := driver.Holder{Name: name, Owner: owner.String, Fence: uint64(fence.Int64), TTL: -1}
	if !owner.Valid && id.Valid {
		h.Owner = fmt.Sprintf("connection %d", id.Int64)
	}
	return h
}

// Refresh checks that token's session still holds its lock (the TTL only
// sets how often): ErrSessionEnded otherwise.
func (d *getLocks) Refresh(ctx context.Context, name, token string, _ time.Duration) error {
	s := d.session(token)
	if s == nil {
		return driver.ErrNotHeld
	}
	err := d.healthy(ctx, s)
	if errors.Is(err, driver.ErrSessionEnded) {
		d.unpin(token)
	}
	return err
}

// healthy asks the session's own connection whether it holds its key.
func (d *getLocks) healthy(ctx context.Context, s *glSession) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return driver.ErrSessionEnded
	}
	var mine sql.NullBool
	err := s.conn.QueryRowContext(ctx, glMine, s.key).Scan(&mine)
	if err != nil && ctx.Err() != nil {
		return err // the caller's deadline, not the session's end
	}
	if err != nil || !mine.Bool {
		s.ended = true
		_ = s.conn.Raw(func(any) error { return errBadConn })
		_ = s.conn.Close()
		return driver.ErrSessionEnded
	}
	return nil
}

// Release unlocks and returns the connection to the pool. The holder
// row stays, no longer counted (getlock_grant.go).
func (d *getLocks) Release(ctx context.Context, name, token string) error {
	s := d.unpin(token)
	if s == nil {
		return driver.ErrNotHeld
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return driver.ErrSessionEnded
	}
	s.ended = true
	released, err := d.unlock(ctx, s)
	if err != nil {
		_ = s.conn.Raw(func(any) error { return errBadConn }) // closed: the server frees the lock
		_ = s.conn.Close()
		if ctx.Err() != nil {
			return err
		}
		return driver.ErrSessionEnded // a lock dies with its connection
	}
	_ = s.conn.Close()
	if released.Int64 != 1 {
		return driver.ErrSessionEnded
	}
	return nil
}

// end closes a session's connection (which frees its lock, if the
// connection goes back unlocked: it is closed for good when the lock may
// be held).
func (d *getLocks) end(s *glSession) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ended {
		s.ended = true
		_ = s.conn.Raw(func(any) error { return errBadConn })
		_ = s.conn.Close()
	}
}

func (d *getLocks) session(token string) *glSession {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.sessions[token]
}

// Close ends the monitor and every session left, and closes the pool
// when it was opened from a URL.
func (d *getLocks) Close() error {
	d.mu.Lock()
	left := d.sessions
	d.sessions = map[string]*glSession{}
	d.mu.Unlock()
	d.stopMonitor()
	for _, s := range left {
		d.end(s)
	}
	return d.close()
}

// Migrate and MigrateReport are the shared schema's.
func (d *getLocks) Migrate(ctx context.Context) error { return d.base.Migrate(ctx) }

// List returns the held locks whose names start with prefix, by name.
func (d *getLocks) List(ctx context.Context, prefix string) ([]driver.Holder, error) {
	rows, err := d.db.QueryContext(ctx, d.list, prefix, prefix)
	if err != nil {
		return nil, d.classify(err)
	}
	defer rows.Close()
	var hs []driver.Holder
	for rows.Next() {
		var (
			h  driver.Holder
			id uint64
		)
		if err := rows.Scan(&h.Name, &h.Owner, &h.Fence, &id); err != nil {
			return nil, err
		}
		h.TTL = -1
		hs = append(hs, h)
	}
	return hs, d.classify(rows.Err())
}

// Inspect returns name's holder; ok is false when it is free. A holder
// that has not yet published its row (the moment between GET_LOCK and
// the publish) is reported by its connection.
func (d *getLocks) Inspect(ctx context.Context, name string) (driver.Holder, bool, error) {
	h := driver.Holder{Name: name, TTL: -1}
	var id uint64
	err := d.db.QueryRowContext(ctx, d.inspect, name).Scan(&h.Owner, &h.Fence, &id)
	if errors.Is(err, sql.ErrNoRows) {
		hh, err := d.holderOf(ctx, name)
		if err != nil || hh.Owner == "" {
			return driver.Holder{}, false, err
		}
		return hh, true, nil
	}
	if err != nil {
		return driver.Holder{}, false, d.classify(err)
	}
	return h, true, nil
}

// killWait bounds how long ForceRelease waits for a killed connection to
// let go of its lock.
const killWait = 10 * time.Second

// killed waits until connection id no longer holds name's lock: KILL
// CONNECTION returns once the connection is told, and the server frees its
// locks when its thread ends, a moment later. It checks after 1 ms, then
// up to 16 ms apart, for up to killWait.
func (d *getLocks) killed(ctx context.Context, name string, id int64) error {
	stop := time.Now().Add(killWait)
	for wait := time.Millisecond; ; wait = min(2*wait, 16*time.Millisecond) {
		var still bool
		if err := d.db.QueryRowContext(ctx, `SELECT IS_USED_LOCK(?) <=> ?`, Key(name), id).Scan(&still); err != nil {
			return d.classify(err)
		}
		if !still {
			return nil
		}
		if time.Now().After(stop) {
			return fmt.Errorf("mysqllock: force-release of %q: connection %d still holds the lock %s after it was killed", name, id, killWait)
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
}

// ForceRelease ends the connection holding name's lock (KILL CONNECTION:
// the server frees its locks, and the holder's monitor sees it within
// monitorEvery) and draws a new fence that stands between the evicted
// holder and the resource.
func (d *getLocks) ForceRelease(ctx context.Context, name string) (driver.Holder, bool, uint64, error) {
	var (
		id    sql.NullInt64
		owner sql.NullString
		fence sql.NullInt64
	)
	if err := d.db.QueryRowContext(ctx, d.holderQ, Key(name)).Scan(&id, &owner, &fence); err != nil {
		return driver.Holder{}, false, 0, d.classify(err)
	}
	if id.Valid {
		if _, err := d.db.ExecContext(ctx, fmt.Sprintf("KILL CONNECTION %d", id.Int64)); err != nil {
			return driver.Holder{}, false, 0, d.classify(err)
		}
		if err := d.killed(ctx, name, id.Int64); err != nil {
			return driver.Holder{}, false, 0, err
		}
	}
	newFence, err := d.drawNext(ctx)
	if err != nil {
		return driver.Holder{}, false, 0, d.classify(err)
	}
	if !id.Valid {
		return driver.Holder{}, false, newFence, nil
	}
	return describe(name, id, owner, fence), true, newFence, nil
}
