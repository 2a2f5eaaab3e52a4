package baseline

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/dlockdev/dlock/internal/benchwork"
	"github.com/dlockdev/dlock/mysqllock"
)

// Statements of the hand-written GET_LOCK lock.
const (
	myGetLock     = `SELECT GET_LOCK(?, ?)`
	myReleaseLock = `SELECT RELEASE_LOCK(?)`
)

// myForever is the blocking waiter's GET_LOCK timeout when its context
// has no deadline: a year, in seconds.
const myForever = 365 * 24 * 3600

// mysqlGetLock is raw GET_LOCK named locks on connections of a pool, each
// kept from its GET_LOCK to its RELEASE_LOCK (the lock is the session's).
type mysqlGetLock struct{ db *sql.DB }

// myKey is the GET_LOCK name of a lock name: hashed as mysqllock hashes
// its own (a GET_LOCK name is at most 64 characters), apart from dlock's.
func myKey(name string) string { return mysqllock.Key(keyFor(name)) }

// take runs GET_LOCK(key, wait) on a pool connection and keeps the
// connection when it is granted.
func (g mysqlGetLock) take(ctx context.Context, key string, wait float64) (func(context.Context) error, bool, error) {
	conn, err := g.db.Conn(ctx)
	if err != nil {
		return nil, false, err
	}
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, myGetLock, key, wait).Scan(&got); err != nil || got.Int64 != 1 {
		_ = conn.Close()
		return nil, false, err
	}
	return func(ctx context.Context) error {
		defer conn.Close()
		var freed sql.NullInt64
		if err := conn.QueryRowContext(ctx, myReleaseLock, key).Scan(&freed); err != nil {
			return err
		}
		if freed.Int64 != 1 {
			return errors.New("baseline: RELEASE_LOCK did not free the lock")
		}
		return nil
	}, true, nil
}

// attempt is one GET_LOCK(key, 0).
func (g mysqlGetLock) attempt(name string) attempt {
	key := myKey(name)
	return func(ctx context.Context) (func(context.Context) error, bool, error) { return g.take(ctx, key, 0) }
}

// contend blocks in the server: GET_LOCK with the context's remaining
// time (a year without a deadline), again if it times out.
func (g mysqlGetLock) contend(_ context.Context, _ int, name string) (benchwork.Lock, func(), error) {
	key := myKey(name)
	return func(ctx context.Context, _ int) (func(context.Context) error, error) {
		for {
			wait := float64(myForever)
			if dl, ok := ctx.Deadline(); ok {
				wait = max(0, time.Until(dl).Seconds())
			}
			release, ok, err := g.take(ctx, key, wait)
			if err != nil || ok {
				return release, err
			}
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
	}, func() {}, nil
}
