package pglock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dlockdev/dlock/driver"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
)

// advisory is the advisory-mode driver: a held lock is a session advisory
// lock on a connection pinned from the pool for the life of the lease.
var _ driver.SessionWatcher = (*advisory)(nil)

type advisory struct {
	base
	listener                                                                   *listener // evictions only: waiters wait in the server
	try, tryUntil, holderOf, block, blockUntil, check, release, epoch, publish string

	mu       sync.Mutex
	sessions map[string]*session // by token
}

func newAdvisory(b base) *advisory {
	d := &advisory{
		base: b, listener: newListener(b.pool, "", "", b.evicted), try: b.sql(advisoryTry), tryUntil: b.sql(advisoryTryUntil), holderOf: b.sql(advisoryHolderOf), block: b.sql(advisoryBlock), blockUntil: b.sql(advisoryBlockUntil), check: advisoryCheck,
		release: advisoryRelease, epoch: b.sql(advisoryEpoch), publish: b.sql(advisoryPublish),
		sessions: map[string]*session{},
	}
	d.listener.onEvict = d.markEvicted
	return d
}

// Capabilities: the lease ends with the session, the TTL only paces the
// health checks.
// adoptWhyNot says why advisory mode cannot adopt a lease.
const adoptWhyNot = "in Postgres advisory mode a lock is held by the session of the connection that took it, " +
	"and no other connection can take it over (use mode=lease)"

func (d *advisory) Capabilities() driver.Capabilities {
	return driver.Capabilities{SessionBound: true, ListLag: watchDelay, AdoptWhyNot: adoptWhyNot}
}

// TryAcquire takes a pool connection and makes one attempt on it: one
// statement. The connection stays pinned to the lease when the lock is
// taken and goes back to the pool otherwise. Any error closes it: a
// session whose state is unknown may hold the lock, and closing it is
// what frees it. A Grant with Acquired false is returned only when
// pg_try_advisory_lock said false; every other outcome is an error.
func (d *advisory) TryAcquire(ctx context.Context, req driver.Request) (driver.Grant, error) {
	return d.attempt(ctx, req, false)
}

// AcquireWait (driver.Queuer) waits for the lock in the server:
// pg_advisory_lock, which the server grants to its waiters in turn as
// each holder unlocks, and at once when the lock is free: one statement
// whether it waits or not. The end of ctx cancels the wait and closes the
// connection.
func (d *advisory) AcquireWait(ctx context.Context, req driver.Request) (driver.Grant, error) {
	return d.attempt(ctx, req, true)
}

func (d *advisory) attempt(ctx context.Context, req driver.Request, wait bool) (driver.Grant, error) {
	if s := d.session(req.Token); s != nil {
		return driver.Grant{Acquired: true, Fence: s.fence}, nil
	}
	sent := time.Now()
	conn, err := d.pool.Acquire(ctx)
	if err != nil {
		return driver.Grant{}, d.classify(err)
	}
	s := &session{conn: conn, key: Key(req.Name), name: req.Name}
	g, err := d.grant(ctx, s, req, wait, sent)
	switch {
	case err != nil:
		destroy(conn)
		return g, d.classify(err)
	case !g.Acquired:
		conn.Release()
	default:
		d.pin(req.Token, s)
	}
	return g, nil
}

// grant runs one statement on s's connection: the try, or, when wait is
// set, the blocking pg_advisory_lock (which returns at once when the lock
// is free, so an uncontended wait costs the same one round trip). It then
// checks that the connection can be pinned. sent is when the attempt
// began.
func (d *advisory) grant(ctx context.Context, s *session, req driver.Request, wait bool, sent time.Time) (driver.Grant, error) {
	if err := d.newEpoch(ctx, s.conn); err != nil {
		return driver.Grant{}, err
	}
	var fence *int64
	if wait && !d.worthBlocking(ctx) {
		wait = false // too little time left to wait in the server: one try
	}
	if wait {
		later := d.describeLater(ctx, req.Name)
		f, err := d.wait(ctx, s)
		h := later(driver.Holder{Name: req.Name, TTL: -1})
		if err != nil || f == nil {
			return driver.Grant{Holder: h}, err
		}
		fence = f
	} else {
		f, h, err := d.tryFor(ctx, s, req.Name)
		if err != nil || f == nil {
			return driver.Grant{Holder: h}, err
		}
		fence = f
	}
	if err := checkPinnable(ctx, s.conn, s.pid); err != nil {
		return driver.Grant{}, err
	}
	s.fence, s.owner, s.publish = uint64(*fence), req.Owner, d.publish
	s.evictions = d.listener.watchingEvictions
	s.dropFn = s.end // set before the watcher can run
	s.start()
	// The lock lives as long as the session: its TTL, which only paces
	// health checks, counts from the grant however long the wait was. A
	// grant within a tenth of the TTL (no real wait) counts from the
	// attempt's start, which is before the grant: Expires then never lies
	// past the request plus the TTL, as for every backend, even when a
	// loaded server took a while to answer.
	since := time.Now()
	if since.Sub(sent) < req.TTL/10 {
		since = sent
	}
	return driver.Grant{Acquired: true, Fence: s.fence, Since: since}, nil
}

// late is the fence a bounded statement answers when the server took the
// lock only after the attempt's end (advisoryUntil) and gave it back.
const late = -1

// tryFor tries for the lock on s's connection and returns the fence, or nil
// and the holder that refused it. A refusal by a holder that is gone by
// the time it is looked up (it unlocked in between) is tried again, up to
// retries times; a refusal by a waiter past its end (heldBy.lapsed) waits
// for it to give the lock back, up to lapseWait.
func (d *advisory) tryFor(ctx context.Context, s *session, name string) (*int64, driver.Holder, error) {
	for i := 0; ; i++ {
		var f pgtype.Int8 // scanned as a value: a pointer costs a scan plan each time
		if err := d.tryRow(ctx, s).Scan(&f, &s.pid); err != nil {
			return nil, driver.Holder{}, err
		}
		if f.Valid && f.Int64 == late {
			return nil, driver.Holder{Name: name, TTL: -1}, nil
		}
		if f.Valid {
			return &f.Int64, driver.Holder{}, nil
		}
		h, err := d.refused(ctx, s)
		switch {
		case err != nil:
			return nil, driver.Holder{}, err
		case h.lapsed:
			// The statement of a waiter whose caller gave up gives the
			// lock back as soon as it runs: the lock is as good as free.
			wctx, cancel := context.WithTimeout(ctx, lapseWait)
			defer cancel()
			fence, err := d.wait(wctx, s)
			return fence, h.describe(name), err
		case h.pid == nil && i < retries:
			continue // released between the try and the lookup
		}
		return nil, h.describe(name), nil
	}
}

// retries is how many times a try refused by a holder that was gone when
// looked up is tried again.
const retries = 2

// lapseWait bounds how long a try refused by a waiter past its end
// (heldBy.lapsed) waits for that waiter's statement to give the lock back.
const lapseWait = 100 * time.Millisecond

// wait waits for the lock in the server (blockRow) and returns the fence,
// or nil when the wait ended without the lock: the server's bound ran
// out, or the lock came only after it and was given back.
func (d *advisory) wait(ctx context.Context, s *session) (*int64, error) {
	fence := new(int64)
	err := d.blockRow(ctx, s).Scan(fence, &s.pid)
	switch {
	case isLockTimeout(err):
		// The server ended the wait: nothing is left queued. But a grant
		// can race the timeout: the statement then fails, yet the
		// session keeps the lock it was granted (Postgres honours a grant
		// that lands as the wait times out). The lock is freed before the
		// connection goes back to the pool, where it would otherwise hold
		// the lock for as long as it lives.
		if _, err := s.conn.Exec(ctx, advisoryUnlockAll); err != nil {
			return nil, err // the connection is closed, which frees it
		}
		return nil, nil
	case err != nil:
		return nil, err
	case *fence == late:
		return nil, nil
	}
	return fence, nil
}

// blockRow sends the blocking statement: with ctx's deadline, bounded in
// the server a little before it (blockMargin), so that the server, not a
// cancel racing a release, ends the wait.
func (d *advisory) blockRow(ctx context.Context, s *session) pgx.Row {
	left, end, ok := attemptEnd(ctx)
	if !ok {
		return s.conn.QueryRow(ctx, d.block, s.key)
	}
	return s.conn.QueryRow(ctx, d.blockUntil, s.key, left, end)
}

// tryRow sends the try: with ctx's deadline, one that gives back a lock
// the server took after the attempt's end (advisoryTryUntil).
func (d *advisory) tryRow(ctx context.Context, s *session) pgx.Row {
	left, end, ok := attemptEnd(ctx)
	if !ok {
		return s.conn.QueryRow(ctx, d.try, s.key)
	}
	return s.conn.QueryRow(ctx, d.tryUntil, s.key, left, end)
}

// attemptEnd is when a bounded attempt ends in the server, blockMargin
// before ctx's deadline: as the time left from now (at least 1 ms:
// lock_timeout 0 would mean no bound) and as an instant on this host's
// clock (advisoryUntil). ok is false when ctx has no deadline.
func attemptEnd(ctx context.Context) (left time.Duration, end time.Time, ok bool) {
	dl, ok := ctx.Deadline()
	if !ok {
		return 0, time.Time{}, false
	}
	margin := blockMargin(time.Until(dl))
	end = dl.Add(-margin)
	return max(time.Until(end), time.Millisecond), end, true
}

// blockMargin is how long before the caller's deadline the server stops
// waiting: time for its answer to arrive before the context ends, a tenth
// of the wait within [5 ms, 50 ms]. A bounded wait may thus report the
// lock held up to 50 ms before its deadline.
func blockMargin(left time.Duration) time.Duration {
	return min(max(5*time.Millisecond, left/10), 50*time.Millisecond)
}

// minBlock is the shortest wait worth sending to the server: with less
// left before the deadline (after blockMargin), the server's answer might
// not arrive in time, and the cancel would race a release again.
const minBlock = 3 * time.Millisecond

// worthBlocking reports whether ctx leaves time for a bounded wait in the
// server; without a deadline it always does.
func (d *advisory) worthBlocking(ctx context.Context) bool {
	dl, ok := ctx.Deadline()
	if !ok {
		return true
	}
	left := time.Until(dl)
	return left-blockMargin(left) >= minBlock
}

// isLockTimeout reports the server's lock_not_available (55P03), which
// the bounded wait (advisoryBlockUntil) ends with.
func isLockTimeout(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "55P03"
}

// describeLater looks the holder up on another connection when a wait
// in the server lasts describeAfter (long enough for a dlock holder to
// have published its holders row), so that a wait that runs out names
// the holder. A shorter wait costs nothing but a timer. The returned
// function stops the look-up (waiting for it if it runs) and returns the
// description found, or h.
func (d *advisory) describeLater(ctx context.Context, name string) func(h driver.Holder) driver.Holder {
	var better *driver.Holder
	done := make(chan struct{})
	t := time.AfterFunc(describeAfter, func() {
		defer close(done)
		var h heldBy
		err := d.pool.QueryRow(ctx, d.holderOf, Key(name)).Scan(h.dest()...)
		if err == nil && h.owner != nil {
			b := h.describe(name)
			better = &b
		}
	})
	return func(h driver.Holder) driver.Holder {
		if !t.Stop() {
			<-done
		}
		if better != nil {
			return *better
		}
		return h
	}
}

// refused looks up the holder of a lock the try found held, on the
// try's connection: its backend pid and holders row, and whether it is a
// waiter past its end (heldBy.lapsed). A failed lookup is an error (the
// connection, whose state is then unknown, is closed).
func (d *advisory) refused(ctx context.Context, s *session) (heldBy, error) {
	var h heldBy
	err := s.conn.QueryRow(ctx, d.holderOf, s.key).Scan(h.dest()...)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return heldBy{}, err
	}
	return h, nil
}

// heldBy is what advisoryHolderOf says about a holder: its backend pid
// (NULL when it unlocked between the try and the lookup), its holders
// row (NULL when it has none), and whether it is a waiter past its end,
// about to give the lock back (advisoryLapsed).
type heldBy struct {
	pid    *uint32
	owner  *string
	fence  *int64
	lapsed bool
}

// dest is what advisoryHolderOf's row is scanned into.
func (h *heldBy) dest() []any { return []any{&h.pid, &h.owner, &h.fence, &h.lapsed} }

// describe turns a positive "held" into a Holder. A holder without a
// holders row is described by its backend pid.
func (h heldBy) describe(name string) driver.Holder {
	d := driver.Holder{Name: name, TTL: -1}
	switch {
	case h.owner != nil && h.fence != nil:
		d.Owner, d.Fence = *h.owner, uint64(*h.fence)
	case h.pid != nil:
		d.Owner = fmt.Sprintf("postgres backend %d", *h.pid)
	}
	return d
}

// describeAfter is when a wait looks its holder up: past watchDelay, by
// when a dlock holder has published its row.
const describeAfter = 2 * watchDelay

// epochKey marks, in a connection's CustomData, that advisoryEpoch ran on
// it.
const epochKey = "dlock.pglock.epoch"

// newEpoch runs advisoryEpoch once per connection. After a crash every
// connection is new, so every grant after a crash follows an advance of
// the sequence past what the crash may have lost.
func (d *advisory) newEpoch(ctx context.Context, conn *pgxpool.Conn) error {
	data := conn.Conn().PgConn().CustomData()
	if data[epochKey] != nil {
		return nil
	}
	if _, err := conn.Exec(ctx, d.epoch); err != nil {
		return err
	}
	data[epochKey] = true
	return nil
}

func (d *advisory) session(token string) *session {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.sessions[token]
}

func (d *advisory) pin(token string, s *session) {
	d.mu.Lock()
	d.sessions[token] = s
	d.mu.Unlock()
}

func (d *advisory) unpin(token string) *session {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.sessions[token]
	delete(d.sessions, token)
	return s
}

// Refresh checks the pinned session's health: the connection is alive
// (a closed socket is seen at once by the session's watcher, without a
// round trip), the backend is the same, and it still holds the key. Any
// failure ends the session (closing the connection frees the lock on the
// server) and reports driver.ErrSessionEnded.
func (d *advisory) Refresh(ctx context.Context, name, token string, _ time.Duration) error {
	s := d.session(token)
	if s == nil {
		return driver.ErrExpired
	}
	if err := s.healthy(ctx, d.check); err != nil {
		if s := d.unpin(token); s != nil {
			s.end()
		}
		return fmt.Errorf("%w: %w", driver.ErrSessionEnded, err)
	}
	return nil
}

// Release unlocks the key and returns the connection to the pool; on any
// failure the connection is closed instead.
func (d *advisory) Release(ctx context.Context, name, token string) error {
	s := d.unpin(token)
	if s == nil {
		return driver.ErrExpired
	}
	return s.unlock(ctx, d.release)
}

// ReleaseBatch (driver.BatchReleaser) releases many leases. Each advisory
// lock lives on its own pinned connection and only that session can
// unlock it, so the unlocks run concurrently, one round trip each in
// parallel: the batch costs one round trip of wall time.
func (d *advisory) ReleaseBatch(ctx context.Context, items []driver.ReleaseItem) ([]error, error) {
	results := make([]error, len(items))
	var wg sync.WaitGroup
	for i, it := range items {
		wg.Go(func() { results[i] = d.Release(ctx, it.Name, it.Token) })
	}
	wg.Wait()
	return results, nil
}

// Close ends every session still pinned (their locks go with them), stops
// the listener, and closes the pool if it was opened from a URL.
func (d *advisory) Close() error {
	d.mu.Lock()
	ss := d.sessions
	d.sessions = map[string]*session{}
	d.mu.Unlock()
	for _, s := range ss {
		s.end()
	}
	d.listener.close()
	return d.close()
}

// Migrate creates the fence sequence, the holders table and the run
// ledger's tables, and retires an earlier version's fence table (see
// advisoryDDL).
func (d *advisory) Migrate(ctx context.Context) error {
	_, err := d.MigrateReport(ctx)
	return err
}

// MigrateReport (driver.MigrationReporter) is Migrate, returning what it
// created: the fence sequence and the tables; none when they existed. Retiring an earlier version's fence table is not reported.
func (d *advisory) MigrateReport(ctx context.Context) ([]string, error) {
	return d.migrate(ctx, advisoryObjects, advisoryDDL...)
}

// WatchSession (driver.SessionWatcher) calls lost when the session
// holding token's lease is known to have ended (its connection closed: a
// server crash or restart, a terminated backend), without waiting for the
// next Refresh. It reports false when token holds nothing here.
func (d *advisory) WatchSession(token string, lost func()) bool {
	s := d.session(token)
	if s == nil {
		return false
	}
	s.onLost(lost)
	return true
}

func destroy(conn *pgxpool.Conn) {
	closeConn(conn.Hijack())
}

var errSessionLost = errors.New("the pinned connection closed (server restart, crash or terminated backend)")
