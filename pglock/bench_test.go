package pglock_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/pglock"
	"github.com/jackc/pgx/v5/pgxpool"
)

// benchPoolConns is every benchmark's pool size, dlock's and the raw
// baseline's alike.
const benchPoolConns = 32

// cycle is one uncontended acquire+release on name.
type cycle func(ctx context.Context, name string) error

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
			b.Run(fmt.Sprintf("%s/goroutines=%d", im.name, g), func(b *testing.B) { runCycles(b, g, fn) })
		}
	}
}

func dlockCycle(l *dlock.Locker) cycle {
	return func(ctx context.Context, name string) error {
		ls, err := l.Acquire(ctx, name, dlock.WithTTL(10*time.Second), dlock.WithAutoRefresh(false))
		if err != nil {
			return err
		}
		return ls.Release(ctx)
	}
}

func rawCycle(pool *pgxpool.Pool) cycle {
	return func(ctx context.Context, name string) error {
		ok, err := rawTry(ctx, pool, pglock.Key(name))
		if err != nil || !ok {
			return fmt.Errorf("raw acquire: %v %v", ok, err)
		}
		return nil
	}
}

// rawTry is the baseline: try the lock on a pooled connection and, when
// taken, unlock it on the same connection before handing it back.
func rawTry(ctx context.Context, pool *pgxpool.Pool, key int64, critical ...func()) (bool, error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return false, err
	}
	defer conn.Release()
	var ok bool
	if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", key).Scan(&ok); err != nil || !ok {
		return false, err
	}
	for _, f := range critical {
		f()
	}
	_, err = conn.Exec(ctx, "SELECT pg_advisory_unlock($1)", key)
	return err == nil, err
}

// runCycles spreads b.N cycles over g goroutines, each on its own name.
func runCycles(b *testing.B, g int, fn cycle) {
	ctx := context.Background()
	var left atomic.Int64
	left.Store(int64(b.N))
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for i := range g {
		name := fmt.Sprintf("bench/%s/%d", b.Name(), i)
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				if err := fn(ctx, name); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "ops/s")
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
	r := &contention{name: fmt.Sprintf("bench/contended/%s/%d", im.name, time.Now().UnixNano())}
	workers := make([]func(*atomic.Int64) int, contenders)
	for i := range workers {
		workers[i] = func(left *atomic.Int64) int { return r.raw(b, pool, left) }
		if im.cfg != nil {
			l, err := im.cfg.Locker(pool)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = l.Close() })
			workers[i] = func(left *atomic.Int64) int { return r.work(b, l, left) }
		}
	}
	b.ResetTimer()
	start := time.Now()
	var left atomic.Int64
	left.Store(int64(b.N))
	var wg sync.WaitGroup
	counts := make([]int, contenders)
	for i, w := range workers {
		wg.Go(func() { counts[i] = w(&left) })
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	r.report(b, elapsed, counts)
}

type contention struct {
	name string

	mu       sync.Mutex
	released time.Time // when the last holder released; zero after a grant
	handoffs []time.Duration
	waits    []time.Duration
}

func (r *contention) work(b *testing.B, l *dlock.Locker, left *atomic.Int64) int {
	ctx := context.Background()
	n := 0
	for left.Add(-1) >= 0 {
		t0 := time.Now()
		ls, err := l.Acquire(ctx, r.name, dlock.WithTTL(5*time.Second), dlock.WithWait(time.Minute))
		if err != nil {
			b.Error(err)
			return n
		}
		r.granted(time.Since(t0))
		n++
		r.releasing()
		if err := ls.Release(ctx); err != nil {
			b.Error(err)
			return n
		}
		time.Sleep(time.Millisecond)
	}
	return n
}

func (r *contention) raw(b *testing.B, pool *pgxpool.Pool, left *atomic.Int64) int {
	ctx := context.Background()
	key := pglock.Key(r.name)
	n := 0
	for left.Add(-1) >= 0 {
		t0 := time.Now()
		for {
			ok, err := rawTry(ctx, pool, key, func() { r.granted(time.Since(t0)); r.releasing() })
			if err != nil {
				b.Error(err)
				return n
			}
			if ok {
				break
			}
			runtime.Gosched()
		}
		n++
		time.Sleep(time.Millisecond)
	}
	return n
}

func (r *contention) releasing() {
	r.mu.Lock()
	r.released = time.Now()
	r.mu.Unlock()
}

func (r *contention) granted(wait time.Duration) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.waits = append(r.waits, wait)
	if !r.released.IsZero() {
		r.handoffs = append(r.handoffs, now.Sub(r.released))
		r.released = time.Time{}
	}
}

func (r *contention) report(b *testing.B, elapsed time.Duration, counts []int) {
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "cs/s")
	b.ReportMetric(ms(pct(r.handoffs, 50)), "handoff-p50-ms")
	b.ReportMetric(ms(pct(r.handoffs, 99)), "handoff-p99-ms")
	b.ReportMetric(ms(pct(r.waits, 50)), "wait-p50-ms")
	b.ReportMetric(ms(pct(r.waits, 99)), "wait-p99-ms")
	lo, hi := slices.Min(counts), slices.Max(counts)
	if hi > 0 {
		b.ReportMetric(float64(lo)/float64(hi), "fair-min/max")
	}
	b.ReportMetric(0, "ns/op")
}

func pct(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
