package mysqllock

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"sync"
	"time"
)

// This file holds lease mode's wake keys: MySQL has no LISTEN/NOTIFY, so
// a release wakes the next waiter through a GET_LOCK named lock, the
// name's wake key, that every holder keeps while it holds the lease and
// frees right after its release. Waiters wait in the server, in GET_LOCK
// on the wake key (see AcquireWait), which MySQL and MariaDB grant in the
// order the waiters came (their metadata lock queue is first in, first
// out): the release itself hands the key to the first waiter, which then
// takes the row.
//
// The row stays the lock: the key only orders and wakes. A lease granted
// by a single attempt keeps its key on the driver's shared connection
// (one per driver, taken on the first grant); one granted to a waiter
// keeps it on the connection it waited on. A lease without a key (adopted,
// or granted while a stopped or cut-off process kept the key) is
// released without waking anybody: the waiters then find the free row
// by their checks (see watchRow).

// handoffGrace is how long a released or expired row is kept for whoever
// holds its wake key (the waiter just woken, taking the row): a single
// attempt is refused meanwhile, so that it does not take the turn of the
// waiters. After it, the key's holder is taken to be stopped or cut off,
// and the row is granted without the key.
const handoffGrace = 500 * time.Millisecond

// wakeKey is the GET_LOCK name of the wake key of name in table: "dlock:w:"
// and 40 hex digits of SHA-256 over both (48 characters; MySQL's limit is
// 64). It is distinct from get_lock mode's keys (Key).
func wakeKey(table, name string) string {
	sum := sha256.Sum256([]byte(table + "\x00" + name))
	return "dlock:w:" + hex.EncodeToString(sum[:])[:40]
}

// Wake-key statements.
const (
	wakeTake    = `SELECT GET_LOCK(?, ?)`
	wakeRelease = `DO RELEASE_LOCK(?)`
)

// keyHold is a lease's wake key: on its waiter's own connection, or
// (conn nil) on the driver's shared one.
type keyHold struct {
	key  string
	conn *sql.Conn
}

// wakeKeys are the wake keys a driver holds, by the token of their lease.
type wakeKeys struct {
	db *sql.DB

	mu     sync.Mutex
	shared *sql.Conn         // nil until the first keyed single attempt
	onSh   map[string]string // key -> token, for the keys on shared
	holds  map[string]keyHold
}

func newWakeKeys(db *sql.DB) *wakeKeys {
	return &wakeKeys{db: db, onSh: map[string]string{}, holds: map[string]keyHold{}}
}

// takeShared tries once, without waiting, to take key for token on the
// shared connection. It reports false when another connection holds the
// key or the shared connection holds it for another token (MySQL counts a
// connection's GET_LOCKs of one key: a second one would succeed).
func (w *wakeKeys) takeShared(ctx context.Context, key, token string) (bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if t, ok := w.onSh[key]; ok {
		return t == token, nil
	}
	if w.shared == nil {
		c, err := w.db.Conn(ctx)
		if err != nil {
			return false, err
		}
		w.shared = c
	}
	var got sql.NullInt64
	if err := w.shared.QueryRowContext(ctx, wakeTake, key, 0).Scan(&got); err != nil {
		w.dropShared()
		return false, err
	}
	if got.Int64 != 1 {
		return false, nil
	}
	w.onSh[key] = token
	w.holds[token] = keyHold{key: key}
	return true, nil
}

// dropShared closes the shared connection (the server frees its keys)
// and forgets its keys' holds. w.mu is held.
func (w *wakeKeys) dropShared() {
	if w.shared != nil {
		discard(w.shared)
		w.shared = nil
	}
	for k, t := range w.onSh {
		delete(w.holds, t)
		delete(w.onSh, k)
	}
}

// keep records that token's lease holds key on conn, a waiter's
// connection pinned from now on.
func (w *wakeKeys) keep(token, key string, conn *sql.Conn) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.holds[token] = keyHold{key: key, conn: conn}
}

// holding reports whether token's lease holds its wake key.
func (w *wakeKeys) holding(token string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.holds[token]
	return ok
}

// give frees token's wake key, if it holds one, waking the next waiter,
// within giveTimeout even when ctx has ended (a lease's release). A key
// that cannot be freed is freed by closing its connection.
func (w *wakeKeys) give(ctx context.Context, token string) {
	w.giveBy(context.WithoutCancel(ctx), token)
}

// giveBy is give bounded by ctx too: an attempt that took the key and was
// refused returns by its caller's deadline, closing the key's connection
// if the server has not answered by then (the shared connection's other
// keys go with it: their leases then release without waking anybody).
func (w *wakeKeys) giveBy(ctx context.Context, token string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	h, ok := w.holds[token]
	if !ok {
		return
	}
	delete(w.holds, token)
	ctx, cancel := context.WithTimeout(ctx, giveTimeout)
	defer cancel()
	if h.conn != nil {
		if _, err := h.conn.ExecContext(ctx, wakeRelease, h.key); err != nil {
			discard(h.conn)
			return
		}
		_ = h.conn.Close()
		return
	}
	delete(w.onSh, h.key)
	if _, err := w.shared.ExecContext(ctx, wakeRelease, h.key); err != nil {
		w.dropShared()
	}
}

// giveAfter runs release (a statement freeing token's row) and then frees
// token's wake key, in one message on the key's connection (its pool
// batches): the row is free, committed, before the key wakes the next
// waiter. held is false, and nothing is sent, when token holds no key. On
// a failure the key's connection is closed, which frees the key.
func (w *wakeKeys) giveAfter(ctx context.Context, token string, release step) (affected int64, held bool, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	h, ok := w.holds[token]
	if !ok {
		return 0, false, nil
	}
	delete(w.holds, token)
	conn := h.conn
	if conn == nil {
		delete(w.onSh, h.key)
		conn = w.shared
	}
	outs, err := execBatch(ctx, conn, []step{release, {wakeRelease, []any{h.key}}})
	switch {
	case err != nil && h.conn != nil:
		discard(h.conn)
		return 0, true, err
	case err != nil:
		w.dropShared()
		return 0, true, err
	case h.conn != nil:
		_ = h.conn.Close()
	}
	return outs[0].affected, true, nil
}

// giveTimeout bounds the freeing of a key, after which its connection is
// closed instead.
const giveTimeout = 5 * time.Second

// close frees every key by closing the connections that hold them.
func (w *wakeKeys) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for t, h := range w.holds {
		if h.conn != nil {
			discard(h.conn)
		}
		delete(w.holds, t)
	}
	w.dropShared()
}

// discard closes conn for good (not back to the pool): the server frees
// the named locks it held.
func discard(conn *sql.Conn) {
	_ = conn.Raw(func(any) error { return errBadConn })
	_ = conn.Close()
}
