package mysqllock

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlockdev/dlock/driver"
	"github.com/go-sql-driver/mysql"
)

// A lease-mode grant is one message (one round trip on a pool that
// batches statements): the name's wake key asked for without waiting,
// one autocommitted UPDATE that gives the row to the token only if it may
// have it, a read of the row (the outcome, the fence, or the holder), and
// the key given back unless the row was granted.
//
// The UPDATE commits on its own, whenever the server runs it, so it
// carries its caller's deadline on the database clock and refuses once
// that has passed: a server stopped (or starved) while the caller waited
// must not grant the lock, on resuming, to a caller that has given up.
// The deadline is the caller's, moved to the server's clock by the least
// offset the last grants' replies allow (serverClock): the server reads
// its clock after the caller sent the statement, so the offset measured
// from a reply is at most the true one, and the guard errs on the early
// side. On MariaDB the UPDATE never waits for a row lock
// (innodb_lock_wait_timeout 0 for that statement): its clock is read when
// it starts, so a wait would let it grant past the deadline. MySQL 8 has
// neither SET STATEMENT nor a lock wait under a second: there the clock
// is SYSDATE, read after the wait. A row busy with another statement
// is tried again, 1 ms later, then 2, up to 16 ms apart, for up to busyFor.
//
// Its conditions, in the order MySQL applies them: the fence is the
// row's next unless the row is already the token's (a retry whose reply
// was lost keeps its fence), set before the token it compares; the row is
// granted when it is the token's, or free or expired and not kept for the
// holder of its wake key (handedOn) unless this connection holds the key
// (IS_USED_LOCK).
const (
	leaseTake = `UPDATE {{table}} SET fence = IF(token <=> ?, fence, fence + 1), token = ?, owner = ?,
	expires_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND
WHERE name = ? AND {{clock}} < ? AND (token <=> ? OR
	((token IS NULL OR expires_at <= UTC_TIMESTAMP(6)) AND (IS_USED_LOCK(?) <=> CONNECTION_ID()
		OR token IS NOT NULL OR owner <> ? OR expires_at <= UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND)))`

	// takeMariaDB is leaseTake on MariaDB: it never waits for a row lock,
	// and reads its clock when it starts.
	takeMariaDB  = "SET STATEMENT innodb_lock_wait_timeout = 0 FOR\n"
	clockMariaDB = `TIMESTAMPDIFF(MICROSECOND, '1970-01-01', UTC_TIMESTAMP(6))`
	// clockMySQL is the clock of leaseTake on MySQL 8, which has no SET
	// STATEMENT and no lock wait shorter than a second: SYSDATE is read
	// when the condition is, after any wait for the row lock (wrong on a
	// server started with --sysdate-is-now).
	clockMySQL = `UNIX_TIMESTAMP(SYSDATE(6)) * 1000000`

	// leaseTook reads the outcome of leaseTake (the rows it changed) and
	// the row, with the database clock in µs since 1970.
	leaseTook = `SELECT ROW_COUNT(), token, owner, fence, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at),
	TIMESTAMPDIFF(MICROSECOND, '1970-01-01', UTC_TIMESTAMP(6)) FROM {{table}} WHERE name = ?`

	// leaseKeyBack gives the wake key back unless the row is the token's.
	leaseKeyBack = `DO IF((SELECT token FROM {{table}} WHERE name = ?) <=> ?, 0, RELEASE_LOCK(?))`

	// On MariaDB a grant with the wake key asks for it in a DO (no result
	// set of its own), reads whether it got it with the row (leaseTookKey,
	// which keeps the row's token in a session variable), and gives it
	// back by that variable (leaseKeyBackVar) rather than by reading the
	// row again (the DO clears the variable first: a name without a row
	// leaves it NULL, not a value of an earlier message): measured on one connection, a cycle of 326–454 µs became
	// 239–249 µs. MySQL 8 deprecates setting variables in expressions, so
	// there the grant keeps leaseTook and leaseKeyBack.
	wakeTakeDo   = `DO GET_LOCK(?, ?), @dlock_token := NULL`
	leaseTookKey = `SELECT ROW_COUNT(), @dlock_token := token, owner, fence, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at),
	TIMESTAMPDIFF(MICROSECOND, '1970-01-01', UTC_TIMESTAMP(6)), IS_USED_LOCK(?) <=> CONNECTION_ID() FROM {{table}} WHERE name = ?`
	leaseKeyBackVar = `DO IF(@dlock_token <=> ?, 0, RELEASE_LOCK(?))`

	// serverNow reads the database clock, in µs since 1970.
	serverNow = `SELECT TIMESTAMPDIFF(MICROSECOND, '1970-01-01', UTC_TIMESTAMP(6))`
)

// noDeadline is the deadline sent for a caller without one.
const noDeadline = int64(1) << 62

// busyFor bounds how long an attempt tries a row that other statements
// keep busy, before it returns the server's error.
const busyFor = time.Second

// took is the outcome of one grant message.
type took struct {
	granted bool
	got     bool // the message took the wake key (and kept it: granted)
	row     *row // nil when the name has no row
}

// grantMsg sends one grant message on conn. With key set it asks for the
// name's wake key too, and gives it back unless the row was granted.
func (d *leases) grantMsg(ctx context.Context, conn *sql.Conn, req driver.Request, key string) (took, error) {
	deadline, err := d.clock.deadline(ctx, conn)
	if err != nil {
		return took{}, err
	}
	stmt, err := d.takeStmt(ctx, conn)
	if err != nil {
		return took{}, err
	}
	wake := d.wakeKey(req.Name)
	take := step{stmt, []any{req.Token, req.Token, req.Owner, req.TTL.Microseconds(), req.Name, deadline,
		req.Token, wake, handedOnMark, handoffGrace.Microseconds()}}
	read := step{d.took, []any{req.Name}}
	back := step{d.keyBack, []any{req.Name, req.Token, key}}
	batch, err := d.batching(ctx, conn)
	if err != nil {
		return took{}, err
	}
	var t took
	var r row
	switch {
	case batch && key != "" && d.flavor.Load() == flavorMariaDB:
		t.row, t.got, err = d.grantBatchKeyed(ctx, conn, key, take,
			step{d.tookKey, []any{key, req.Name}}, step{d.keyBackVar, []any{req.Token, key}}, &r)
	case batch:
		t.row, t.got, err = d.grantBatch(ctx, conn, key, take, read, back, &r)
	default:
		t.row, t.got, err = d.grantEach(ctx, conn, key, take, read, back, &r)
	}
	if err != nil {
		return t, err
	}
	t.granted = t.row != nil && r.granted == 1
	if t.got && !t.granted {
		t.got = false // given back by back
	}
	return t, nil
}

// takeStmt is leaseTake for the server conn is on (MariaDB or MySQL),
// asking it once per driver.
func (d *leases) takeStmt(ctx context.Context, conn *sql.Conn) (string, error) {
	maria, err := isMariaDB(ctx, conn, &d.flavor)
	switch {
	case err != nil:
		return "", err
	case maria:
		return d.takeMaria, nil
	}
	return d.takeMySQL, nil
}

// querier is a pool or a connection.
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Servers, as isMariaDB learns them.
const (
	flavorUnknown int32 = iota
	flavorMariaDB
	flavorMySQL
)

// isMariaDB reports whether conn's server is MariaDB (else MySQL),
// asking it the first time and keeping the answer in flavor.
func isMariaDB(ctx context.Context, conn querier, flavor *atomic.Int32) (bool, error) {
	switch flavor.Load() {
	case flavorMariaDB:
		return true, nil
	case flavorMySQL:
		return false, nil
	}
	var version string
	if err := conn.QueryRowContext(ctx, `SELECT VERSION()`).Scan(&version); err != nil {
		return false, err
	}
	if strings.Contains(version, "MariaDB") {
		flavor.Store(flavorMariaDB)
		return true, nil
	}
	flavor.Store(flavorMySQL)
	return false, nil
}

// grantBatch sends the grant in one message; r receives the row.
func (d *leases) grantBatch(ctx context.Context, conn *sql.Conn, key string, take, read, back step, r *row) (*row, bool, error) {
	steps := []step{take, read}
	if key != "" {
		steps = []step{{wakeTake, []any{key, 0}}, take, read, back}
	}
	q, args := joinSteps(steps)
	rows, err := conn.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, false, err
	}
	defer rows.Close()
	got := false
	if key != "" {
		var g sql.NullInt64
		if rows.Next() {
			err = rows.Scan(&g)
		}
		if err != nil {
			return nil, false, err
		}
		got = g.Int64 == 1
		if !rows.NextResultSet() {
			return nil, got, d.keyAfterFailure(ctx, conn, key, got, rows.Err())
		}
	}
	found, err := d.scanTook(rows, r)
	if err == nil {
		err = rows.Close()
	}
	if err != nil {
		return nil, got, d.keyAfterFailure(ctx, conn, key, got, err)
	}
	if !found {
		return nil, got, nil
	}
	return r, got, nil
}

// grantBatchKeyed sends a grant with the wake key in one message, on
// MariaDB: the key asked for in a DO, whether it was got read with the
// row, and the key given back unless the row is the token's. A message
// that fails may have left the key taken: keyAfterFailure gives it back.
func (d *leases) grantBatchKeyed(ctx context.Context, conn *sql.Conn, key string, take, read, back step, r *row) (*row, bool, error) {
	q, args := joinSteps([]step{{wakeTakeDo, []any{key, 0}}, take, read, back})
	rows, err := conn.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, true, d.keyAfterFailure(ctx, conn, key, true, err)
	}
	defer rows.Close()
	var (
		got sql.NullBool
		now int64
	)
	found := rows.Next()
	if found {
		if err = rows.Scan(&r.granted, &r.token, &r.owner, &r.fence, &r.micros, &now, &got); err == nil {
			d.clock.note(now, time.Now())
		}
	}
	if err == nil {
		err = rows.Err()
	}
	if err == nil {
		err = rows.Close() // the key given back: an error if that failed
	}
	if err != nil {
		return nil, true, d.keyAfterFailure(ctx, conn, key, true, err)
	}
	if !found {
		return nil, false, nil // no row: not granted, and the key given back
	}
	return r, got.Bool, nil
}

// grantEach sends the grant's statements one at a time, on conn.
func (d *leases) grantEach(ctx context.Context, conn *sql.Conn, key string, take, read, back step, r *row) (*row, bool, error) {
	got := false
	if key != "" {
		var g sql.NullInt64
		if err := conn.QueryRowContext(ctx, wakeTake, key, 0).Scan(&g); err != nil {
			return nil, false, err
		}
		got = g.Int64 == 1
	}
	if _, err := conn.ExecContext(ctx, take.q, take.args...); err != nil {
		return nil, got, d.keyAfterFailure(ctx, conn, key, got, err)
	}
	rows, err := conn.QueryContext(ctx, read.q, read.args...)
	if err != nil {
		return nil, got, d.keyAfterFailure(ctx, conn, key, got, err)
	}
	found, err := d.scanTook(rows, r)
	if cerr := rows.Close(); err == nil {
		err = cerr
	}
	if err == nil && key != "" {
		_, err = conn.ExecContext(ctx, back.q, back.args...)
	}
	if err != nil {
		return nil, got, d.keyAfterFailure(ctx, conn, key, got, err)
	}
	if !found {
		return nil, got, nil
	}
	return r, got, nil
}

// scanTook reads leaseTook's row into r, and the database clock into the
// driver's serverClock; found is false when the name has no row.
func (d *leases) scanTook(rows *sql.Rows, r *row) (found bool, err error) {
	if !rows.Next() {
		return false, rows.Err()
	}
	var now int64
	if err := rows.Scan(&r.granted, &r.token, &r.owner, &r.fence, &r.micros, &now); err != nil {
		return false, err
	}
	d.clock.note(now, time.Now())
	return true, nil
}

// keyAfterFailure gives the wake key back, on its connection, after a
// grant message failed past asking for it and got it; when that is not
// possible (the server did not answer), the error says so (errKeyKept),
// and the caller closes the connection, which frees the key.
func (d *leases) keyAfterFailure(ctx context.Context, conn *sql.Conn, key string, got bool, err error) error {
	if err == nil {
		err = errors.New("mysqllock: the grant's reply ended early")
	}
	if !got {
		return err
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), giveTimeout)
		defer cancel()
		if _, rerr := conn.ExecContext(ctx, wakeRelease, key); rerr == nil {
			return err
		}
	}
	return errors.Join(err, errKeyKept)
}

// errKeyKept marks a failure after which conn may still hold a wake key:
// its caller closes conn.
var errKeyKept = errors.New("mysqllock: the wake key could not be given back")

// busy reports whether err is a row another statement kept busy (a lock
// wait that ended at once, or a deadlock), or a grant refused for no
// reason its reply shows (errNotGranted).
func busy(err error) bool {
	var me *mysql.MySQLError
	return errors.Is(err, errNotGranted) || errors.As(err, &me) && (me.Number == errLockWaitTimeout || me.Number == errDeadlock)
}

// errLockWaitTimeout is MySQL's ER_LOCK_WAIT_TIMEOUT.
const errLockWaitTimeout = 1205

// whileBusy runs fn until it returns something else than a busy row, for
// up to busyFor and within ctx, backing off from 1 ms to 16 ms.
func whileBusy[T any](ctx context.Context, fn func() (T, error)) (T, error) {
	stop := time.Now().Add(busyFor)
	wait := time.Millisecond
	for {
		v, err := fn()
		if !busy(err) || time.Now().After(stop) {
			return v, err
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return v, ctx.Err()
		}
		wait = min(2*wait, 16*time.Millisecond)
	}
}

// serverClock holds the least offset of the database clock from this
// host's that recent grant replies allow: a reply read at local time
// `received` and stamped `now` by the server (read after the message was
// sent) says offset ≥ now − received. The greatest such bound of the last
// clockWindow is kept; older ones are dropped, so that a clock that is
// adjusted does not leave a stale bound behind.
type serverClock struct {
	mu    sync.Mutex
	least time.Duration
	at    time.Time
}

// clockWindow is how long a bound on the clock offset is used.
const clockWindow = 10 * time.Second

// note records a reply stamped now (µs since 1970, the database clock)
// that was read at received.
func (c *serverClock) note(now int64, received time.Time) {
	bound := time.UnixMicro(now).Sub(received)
	c.mu.Lock()
	defer c.mu.Unlock()
	if received.Sub(c.at) > clockWindow || bound > c.least {
		c.least, c.at = bound, received
	}
}

// deadline is ctx's deadline on the database clock, in µs since 1970,
// reading the database clock on conn first when no bound is recent
// enough; noDeadline for a ctx without one.
func (c *serverClock) deadline(ctx context.Context, conn *sql.Conn) (int64, error) {
	dl, ok := ctx.Deadline()
	if !ok {
		return noDeadline, nil
	}
	c.mu.Lock()
	least, fresh := c.least, time.Since(c.at) <= clockWindow
	c.mu.Unlock()
	if !fresh {
		var now int64
		if err := conn.QueryRowContext(ctx, serverNow).Scan(&now); err != nil {
			return 0, err
		}
		c.note(now, time.Now())
		c.mu.Lock()
		least = c.least
		c.mu.Unlock()
	}
	return dl.Add(least).UnixMicro(), nil
}
