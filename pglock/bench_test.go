package pglock_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/internal/benchwork"
	"github.com/dlockdev/dlock/pglock"
	"github.com/jackc/pgx/v5/pgxpool"
)

// benchPoolConns is every benchmark's pool size, dlock's and the raw
// baseline's alike.
const benchPoolConns = 32

// impl is one way to take a lock: a dlock mode, or the raw baseline.
type impl struct {
	name string
	cfg  *pglock.Config // nil: raw pg_try_advisory_lock on the pool
}

var impls = []impl{
	{"lease", &pglock.Config{}},
	{"advisory", &pglock.Config{Mode: pglock.Advisory}},
	{"raw-advisory", nil},
}

func benchPool(b *testing.B, d *db) *pgxpool.Pool {
	pool := newPool(b, fmt.Sprintf("%s&pool_max_conns=%d", d.url, benchPoolConns))
	warm(b, pool, benchPoolConns)
	return pool
}

// BenchmarkUncontended: acquire+release on distinct names from 1, 16 and 64
// goroutines, in both modes and for the raw baseline (pool connection,
// SELECT pg_try_advisory_lock, SELECT pg_advisory_unlock, back to the
// pool), all on one pool of benchPoolConns connections.
func BenchmarkUncontended(b *testing.B) {
	d := newDB(b)
	pool := benchPool(b, d)
	for _, g := range []int{1, 16, 64} {
		for _, im := range impls {
			fn := rawCycle(pool)
			if im.cfg != nil {
				l, err := im.cfg.Locker(pool)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = l.Close() })
				fn = dlockCycle(l)
			}
			b.Run(fmt.Sprintf("%s/goroutines=%d", im.name, g), func(b *testing.B) {
				benchwork.Uncontended(b, g, "bench/"+b.Name()+"/", fn).ReportRate(b, "ops/s")
			})
		}
	}
}

func dlockCycle(l *dlock.Locker) benchwork.Cycle {
	return benchwork.AcquireRelease(l, dlock.WithTTL(10*time.Second), dlock.WithAutoRefresh(false))
}

func rawCycle(pool *pgxpool.Pool) benchwork.Cycle {
	return func(ctx context.Context, name string) error {
		release, ok, err := rawTry(ctx, pool, pglock.Key(name))
		if err != nil || !ok {
			return fmt.Errorf("raw acquire: %v %v", ok, err)
		}
		return release(ctx)
	}
}

// rawLock is the contended baseline: rawTry until the lock is taken,
// retrying at once (a hot loop).
func rawLock(pool *pgxpool.Pool, key int64) benchwork.Lock {
	return func(ctx context.Context, _ int) (func(context.Context) error, error) {
		for {
			release, ok, err := rawTry(ctx, pool, key)
			if err != nil || ok {
				return release, err
			}
			runtime.Gosched()
		}
	}
}

// rawTry is the baseline: try the lock on a pooled connection; when taken,
// release unlocks it on the same connection before handing it back, and
// when not, the connection goes straight back.
func rawTry(ctx context.Context, pool *pgxpool.Pool, key int64) (release func(context.Context) error, ok bool, err error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, false, err
	}
	if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", key).Scan(&ok); err != nil || !ok {
		conn.Release()
		return nil, false, err
	}
	return func(ctx context.Context) error {
		defer conn.Release()
		_, err := conn.Exec(ctx, "SELECT pg_advisory_unlock($1)", key)
		return err
	}, true, nil
}

// BenchmarkContended: 16 goroutines on one name, each pausing 1 ms after
// its release; each has its own Locker (as separate processes would) on
// one shared pool. dlock's waiters are woken by NOTIFY with the default
// backoff as fallback; the raw baseline's waiters retry at once (a hot
// loop: its upper bound). Reports critical sections per second, the
// handoff time (release to the next grant) and the wait per acquire.
func BenchmarkContended(b *testing.B) {
	d := newDB(b)
	pool := benchPool(b, d)
	for _, im := range impls {
		b.Run(im.name, func(b *testing.B) { contended(b, pool, im) })
	}
}

const contenders = 16

func contended(b *testing.B, pool *pgxpool.Pool, im impl) {
	name := fmt.Sprintf("bench/contended/%s/%d", im.name, time.Now().UnixNano())
	lock := rawLock(pool, pglock.Key(name))
	if im.cfg != nil {
		lockers := make([]*dlock.Locker, contenders)
		for i := range lockers {
			l, err := im.cfg.Locker(pool)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = l.Close() })
			lockers[i] = l
		}
		lock = benchwork.Acquire(lockers, name, dlock.WithTTL(5*time.Second), dlock.WithWait(time.Minute))
	}
	benchwork.Contended(b, contenders, lock).Report(b)
}
