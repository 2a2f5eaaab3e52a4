package mysqllock

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/dlockdev/dlock/driver"
)

// A queued waiter's turn in one message (MariaDB, on a pool that batches
// statements): a read of the row, the wait for the name's wake key, and
// the grant that follows it, run back to back in the server:
//
//	SELECT … (leaseState: the holder as the wait begins);
//	DO @dlock_t0 := UTC_TIMESTAMP(6), GET_LOCK(key, wait);
//	UPDATE … (leaseTake);
//	SELECT … (the row, whether the key is held, the µs from @dlock_t0 to the grant)
//
// so that a release's hand-off costs the woken waiter no round trip: the
// server grants the row as soon as it hands over the key, and the reply
// is the grant. Sent one at a time, the key's reply and the grant would
// put a round trip of the client between every release and the next
// grant. The server sends the first read's result before it starts to
// wait, so that a wait its caller's context ends still names the holder.
//
// The server cannot tell that a waiter's process died while it waited
// (its connection is only found closed when the reply is sent), so the
// grant is provisional (driver.Grant.Window): the row is granted for
// queuedWindow (or the TTL if shorter), and the lease's first refresh,
// due within a third of it, extends it to its TTL. A waiter that died
// keeps the lock for queuedWindow, not for its TTL.
//
// The lease counts from the time the message was sent plus the server's
// time from the wait's start to the grant: the server started no sooner
// than the message was sent, so the lease is never thought to run later
// than it does (the wait is measured on the database clock, as the
// lease's TTL is).
const (
	queuedWindow = time.Second
	queueTakeDo  = `DO @dlock_t0 := UTC_TIMESTAMP(6), GET_LOCK(?, ?)`
	queueTook    = `SELECT ROW_COUNT(), token, owner, fence, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at),
	TIMESTAMPDIFF(MICROSECOND, '1970-01-01', UTC_TIMESTAMP(6)), IS_USED_LOCK(?) <=> CONNECTION_ID(),
	TIMESTAMPDIFF(MICROSECOND, @dlock_t0, expires_at) FROM {{table}} WHERE name = ?`
)

// queueMsgOK reports whether a queued waiter's turn can be one message:
// on MariaDB, over a pool that batches statements, once both are known.
func (d *leases) queueMsgOK() bool {
	return d.multi.Load() == batchYes && d.flavor.Load() == flavorMariaDB
}

// queuedTook is the reply of a queued waiter's message.
type queuedTook struct {
	took
	// before is the row as the wait began (nil: no row, or no reply).
	before *row
	// waited is the database clock's time from the wait's start to the
	// grant, and window how long the grant holds until its first refresh
	// (when granted).
	waited, window time.Duration
}

// queueMsg sends a queued waiter's turn on conn, its own connection: a
// read of the row, the wait for key, bounded by ctx's deadline, and a
// grant. A reply with the key but no grant (a lease without the key holds
// the row, or the row is missing) leaves the key on conn for headTurn. On
// a failure, the reply's first read may still have come (before).
func (d *leases) queueMsg(ctx context.Context, conn *sql.Conn, req driver.Request, key string) (queuedTook, error) {
	var t queuedTook
	deadline, err := d.clock.deadline(ctx, conn)
	if err != nil {
		return t, err
	}
	window := min(req.TTL, queuedWindow)
	take := step{d.takeMaria, []any{req.Token, req.Token, req.Owner, window.Microseconds(), req.Name, deadline,
		req.Token, key, handedOnMark, handoffGrace.Microseconds()}}
	q, args := joinSteps([]step{{d.state, []any{req.Name}}, {queueTakeDo, []any{key, serverWait(ctx)}}, take,
		{d.queueTook, []any{key, req.Name}}})
	rows, err := conn.QueryContext(ctx, q, args...)
	if err != nil {
		return t, err
	}
	defer rows.Close()
	var before row
	if rows.Next() {
		if err := rows.Scan(&before.token, &before.owner, &before.fence, &before.micros); err != nil {
			return t, err
		}
		t.before = &before
	}
	if !rows.NextResultSet() {
		if err := rows.Err(); err != nil {
			return t, err
		}
		return t, errors.New("mysqllock: the queued grant's reply ended early")
	}
	var (
		r      row
		got    sql.NullBool
		now    int64
		waited sql.NullInt64
	)
	found := rows.Next()
	if found {
		if err = rows.Scan(&r.granted, &r.token, &r.owner, &r.fence, &r.micros, &now, &got, &waited); err == nil {
			d.clock.note(now, time.Now())
		}
	}
	if err == nil {
		err = rows.Err()
	}
	if err == nil {
		err = rows.Close()
	}
	if err != nil {
		return t, err
	}
	t.got = got.Bool
	if found {
		t.row = &r
		t.granted = r.granted == 1
		t.window = window
		if t.granted && waited.Valid {
			t.waited = time.Duration(waited.Int64)*time.Microsecond - window
		}
	}
	return t, nil
}

// heldBy is the holder other than token that r names (ok), live or
// handed on.
func heldBy(name, token string, r *row) (h driver.Holder, ok bool) {
	switch {
	case r == nil || r.token.String == token && r.token.Valid:
		return driver.Holder{}, false
	case r.live():
		return r.holder(name), true
	case r.handedOn():
		return handedOnHolder(name, *r), true
	}
	return driver.Holder{}, false
}

// contendedFor is how long a name is taken to be contended after a wait
// found it held (a wait on it then skips its first attempt and queues at
// once, one message, queueMsg, since that attempt would most likely be
// refused); contendedMost bounds the names remembered.
const (
	contendedFor  = time.Second
	contendedMost = 4096
)
