package mysqllock

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"hash/fnv"
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
// takes the row; on MariaDB over a pool that batches statements, the
// server takes it for the waiter in the message the waiter queued with
// (lease_queue.go), as soon as the key is handed over.
//
// The row stays the lock: the key only orders and wakes. A lease granted
// by a single attempt keeps its key on one of the driver's shared
// connections (up to maxKeyShards, chosen by the key, each taken on its
// first grant); one granted to a waiter
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
// (conn nil) on one of the driver's shared ones, sh.
type keyHold struct {
	key  string
	conn *sql.Conn
	sh   *keyShard
}

// maxKeyShards bounds the shared connections of a driver's single
// attempts: a GET_LOCK holds its connection for the time of a round trip,
// so one connection would serialize every attempt of the driver's
// goroutines (measured: 16 and 64 goroutines did no more than 2). A pool
// with a limit (SetMaxOpenConns) gives the keys a quarter of it, at
// least one.
const maxKeyShards = 8

// keyShard is one shared connection and the keys it holds.
type keyShard struct {
	mu   sync.Mutex
	conn *sql.Conn         // nil until its first keyed single attempt
	onSh map[string]string // key -> token
}

// wakeKeys are the wake keys a driver holds, by the token of their lease.
type wakeKeys struct {
	db     *sql.DB
	shards []keyShard

	mu    sync.Mutex
	holds map[string]keyHold
}

func newWakeKeys(db *sql.DB) *wakeKeys {
	n := maxKeyShards
	if most := db.Stats().MaxOpenConnections; most > 0 {
		n = min(max(most/4, 1), maxKeyShards)
	}
	w := &wakeKeys{db: db, shards: make([]keyShard, n), holds: map[string]keyHold{}}
	for i := range w.shards {
		w.shards[i].onSh = map[string]string{}
	}
	return w
}

// shard is the shared connection of key.
func (w *wakeKeys) shard(key string) *keyShard {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return &w.shards[h.Sum32()%uint32(len(w.shards))]
}

// shardConn is sh's connection, opened on first use, and the key to ask
// for on it: key, or "" when the connection holds it already (for token,
// or for another lease of this driver on the same name, whose live row
// then refuses the attempt). sh.mu is held.
func (w *wakeKeys) shardConn(ctx context.Context, sh *keyShard, key, token string) (*sql.Conn, string, error) {
	if sh.conn == nil {
		c, err := w.db.Conn(ctx)
		if err != nil {
			return nil, "", err
		}
		sh.conn = c
	}
	if _, ok := sh.onSh[key]; ok {
		return sh.conn, "", nil
	}
	return sh.conn, key, nil
}

// record notes that token's lease holds key on sh's connection. sh.mu is
// held.
func (w *wakeKeys) record(sh *keyShard, key, token string) {
	sh.onSh[key] = token
	w.mu.Lock()
	w.holds[token] = keyHold{key: key, sh: sh}
	w.mu.Unlock()
}

// dropShared closes sh's connection (the server frees its keys) and
// forgets its keys' holds. sh.mu is held.
func (w *wakeKeys) dropShared(sh *keyShard) {
	if sh.conn != nil {
		discard(sh.conn)
		sh.conn = nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for k, t := range sh.onSh {
		if h, ok := w.holds[t]; ok && h.sh == sh {
			delete(w.holds, t)
		}
		delete(sh.onSh, k)
	}
}

// take removes token's hold and returns it.
func (w *wakeKeys) take(token string) (keyHold, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	h, ok := w.holds[token]
	if ok {
		delete(w.holds, token)
	}
	return h, ok
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
// if the server has not answered by then (a shared connection's other
// keys go with it: their leases then release without waking anybody).
func (w *wakeKeys) giveBy(ctx context.Context, token string) {
	h, ok := w.take(token)
	if !ok {
		return
	}
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
	h.sh.mu.Lock()
	defer h.sh.mu.Unlock()
	if h.sh.onSh[h.key] != token || h.sh.conn == nil {
		return // its connection was dropped meanwhile, and the key with it
	}
	delete(h.sh.onSh, h.key)
	if _, err := h.sh.conn.ExecContext(ctx, wakeRelease, h.key); err != nil {
		w.dropShared(h.sh)
	}
}

// giveAfter runs release (a statement freeing token's row) and then frees
// token's wake key, in one message on the key's connection (its pool
// batches): the row is free, committed, before the key wakes the next
// waiter. held is false, and nothing is sent, when token holds no key. On
// a failure the key's connection is closed, which frees the key.
func (w *wakeKeys) giveAfter(ctx context.Context, token string, release step) (affected int64, held bool, err error) {
	h, ok := w.take(token)
	if !ok {
		return 0, false, nil
	}
	steps := []step{release, {wakeRelease, []any{h.key}}}
	if h.conn != nil {
		outs, err := execBatch(ctx, h.conn, steps)
		if err != nil {
			discard(h.conn)
			return 0, true, err
		}
		_ = h.conn.Close()
		return outs[0].affected, true, nil
	}
	h.sh.mu.Lock()
	defer h.sh.mu.Unlock()
	if h.sh.onSh[h.key] != token || h.sh.conn == nil {
		return 0, false, nil // the key went with its connection: release without it
	}
	delete(h.sh.onSh, h.key)
	outs, err := execBatch(ctx, h.sh.conn, steps)
	if err != nil {
		w.dropShared(h.sh)
		return 0, true, err
	}
	return outs[0].affected, true, nil
}

// giveTimeout bounds the freeing of a key, after which its connection is
// closed instead.
const giveTimeout = 5 * time.Second

// close frees every key by closing the connections that hold them.
func (w *wakeKeys) close() {
	w.mu.Lock()
	for t, h := range w.holds {
		if h.conn != nil {
			discard(h.conn)
			delete(w.holds, t)
		}
	}
	w.mu.Unlock()
	for i := range w.shards {
		sh := &w.shards[i]
		sh.mu.Lock()
		w.dropShared(sh)
		sh.mu.Unlock()
	}
}

// discard closes conn for good (not back to the pool): the server frees
// the named locks it held.
func discard(conn *sql.Conn) {
	_ = conn.Raw(func(any) error { return errBadConn })
	_ = conn.Close()
}
