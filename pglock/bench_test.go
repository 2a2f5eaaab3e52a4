package pglock_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/internal/benchwork"
	"github.com/dlockdev/dlock/pglock"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// benchPoolConns is every benchmark pool's size, dlock's and the raw
// baselines' alike.
const benchPoolConns = 32

// counter is a pgx QueryTracer counting statements: each is one round
// trip (statements are prepared once per connection and cached, so the
// prepare's own round trip is paid in the warm-up).
type counter struct{ n atomic.Int64 }

func (c *counter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c *counter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// benchPool opens a warmed pool of benchPoolConns connections whose
// statements are counted.
func benchPool(b *testing.B, d *db) (*pgxpool.Pool, *counter) {
	c := &counter{}
	return tracedPool(b, fmt.Sprintf("%s&pool_max_conns=%d", d.url, benchPoolConns), c, benchPoolConns), c
}

// pair is a dlock mode and its hand-written baseline, each on its own
// pool whose statements are counted.
type pair struct {
	name          string
	dlock, base   func(pool *pgxpool.Pool, b *testing.B) benchwork.Cycle
	dlockN, baseN string
}

var pairs = []pair{
	{"advisory", func(pool *pgxpool.Pool, b *testing.B) benchwork.Cycle {
		return dlockCycle(b, pool, pglock.Config{Mode: pglock.Advisory})
	}, func(pool *pgxpool.Pool, _ *testing.B) benchwork.Cycle { return rawCycle(pool) }, "advisory", "raw-try-unlock"},
	{"advisory-try", func(pool *pgxpool.Pool, b *testing.B) benchwork.Cycle {
		return dlockTryCycle(b, pool, pglock.Config{Mode: pglock.Advisory})
	}, func(pool *pgxpool.Pool, _ *testing.B) benchwork.Cycle { return rawCycle(pool) }, "advisory-try", "raw-try-unlock"},
	{"advisory-driver", func(pool *pgxpool.Pool, b *testing.B) benchwork.Cycle {
		return driverTryCycle(b, pool, pglock.Config{Mode: pglock.Advisory})
	}, func(pool *pgxpool.Pool, _ *testing.B) benchwork.Cycle { return rawCycle(pool) }, "advisory-driver", "raw-try-unlock"},
	{"lease", func(pool *pgxpool.Pool, b *testing.B) benchwork.Cycle {
		return dlockCycle(b, pool, pglock.Config{})
	}, func(pool *pgxpool.Pool, _ *testing.B) benchwork.Cycle { return rawLeaseCycle(pool) }, "lease", "raw-upsert-lease"},
}

// side is one implementation's running totals in an interleaved run.
type side struct {
	cycle   benchwork.Cycle
	count   *counter
	n       int
	elapsed time.Duration
	rt      int64
}

func (s *side) run(b *testing.B, n, g int, prefix string) {
	before := s.count.n.Load()
	c := benchwork.Run(b, n, g, prefix, s.cycle)
	s.n += n
	s.elapsed += c.Elapsed
	s.rt += s.count.n.Load() - before
}

func (s *side) rate() float64 { return float64(s.n) / s.elapsed.Seconds() }

// BenchmarkUncontended: acquire+release on distinct names from 1, 16 and
// 64 goroutines (advisory-try: with TryAcquire, as dlock bench --compare
// measures; advisory-driver: the same on the driver alone), for each
// dlock mode against its hand-written baseline
// (raw pg_try_advisory_lock + pg_advisory_unlock on a pooled connection;
// a one-statement upsert lease + DELETE by token), each on its own pool
// of benchPoolConns connections. The two run interleaved, in slices of
// b.N/20 cycles, so that both see the same machine load (it varies by a
// factor of two within seconds on a shared machine); each cell reports
// both rates, the ratio (x-baseline) and each side's round trips per
// cycle, counted by a pgx tracer.
func BenchmarkUncontended(b *testing.B) {
	d := newDB(b)
	d.exec(b, rawLeaseDDL)
	for _, g := range []int{1, 16, 64} {
		for _, p := range pairs {
			b.Run(fmt.Sprintf("%s/goroutines=%d", p.name, g), func(b *testing.B) {
				// Pools and Lockers of this run alone, closed when it
				// ends: every pair's at every count would pass the
				// server's max_connections.
				dp, dc := benchPool(b, d)
				bp, bc := benchPool(b, d)
				dl := &side{cycle: p.dlock(dp, b), count: dc}
				bl := &side{cycle: p.base(bp, b), count: bc}
				chunk := max(b.N/20, 4*g)
				for done := 0; done < b.N; done += chunk {
					bl.run(b, chunk, g, "bench/base/")
					dl.run(b, chunk, g, "bench/dlock/")
				}
				b.ReportMetric(dl.rate(), p.dlockN+"/s")
				b.ReportMetric(bl.rate(), p.baseN+"/s")
				b.ReportMetric(dl.rate()/bl.rate(), "x-baseline")
				b.ReportMetric(float64(dl.rt)/float64(dl.n), "rt/op")
				b.ReportMetric(float64(bl.rt)/float64(bl.n), "base-rt/op")
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}

func dlockCycle(b *testing.B, pool *pgxpool.Pool, cfg pglock.Config) benchwork.Cycle {
	l, err := cfg.Locker(pool)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = l.Close() })
	return benchwork.AcquireRelease(l, dlock.WithTTL(10*time.Second), dlock.WithAutoRefresh(false))
}

// dlockTryCycle is dlockCycle with TryAcquire, as `dlock bench --compare`
// measures it.
func dlockTryCycle(b *testing.B, pool *pgxpool.Pool, cfg pglock.Config) benchwork.Cycle {
	l, err := cfg.Locker(pool)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = l.Close() })
	return benchwork.TryAcquireRelease(l, dlock.WithTTL(10*time.Second), dlock.WithAutoRefresh(false))
}

// driverTryCycle is dlockTryCycle on the driver alone, without the
// portable layer (no Locker: no token drawn, no lease kept, no watchdog,
// no bounded release context): with dlockTryCycle, it tells the
// driver's share of a cycle from the portable layer's. Each name is its
// own token.
func driverTryCycle(b *testing.B, pool *pgxpool.Pool, cfg pglock.Config) benchwork.Cycle {
	drv, err := cfg.Driver(pool)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = drv.Close() })
	return func(ctx context.Context, name string) error {
		g, err := drv.TryAcquire(ctx, driver.Request{Name: name, Token: name, Owner: "bench", TTL: 10 * time.Second})
		if err != nil || !g.Acquired {
			return fmt.Errorf("driver acquire: %v %v", g.Acquired, err)
		}
		return drv.Release(ctx, name, name)
	}
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

// rawTry is the advisory baseline: try the lock on a pooled connection;
// when taken, release unlocks it on the same connection before handing
// it back, and when not, the connection goes straight back.
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

// rawLeaseDDL, rawLeaseAcquire and rawLeaseRelease are the lease
// baseline a user would write by hand: one upsert that takes a free or
// expired row, one DELETE by token.
const (
	rawLeaseDDL = `CREATE TABLE raw_leases (name text PRIMARY KEY, token text NOT NULL, expires_at timestamptz NOT NULL)`

	rawLeaseAcquire = `INSERT INTO raw_leases AS l (name, token, expires_at)
VALUES ($1, $2, clock_timestamp() + interval '10 seconds')
ON CONFLICT (name) DO UPDATE SET token = excluded.token, expires_at = excluded.expires_at
WHERE l.expires_at <= clock_timestamp()
RETURNING true`

	rawLeaseRelease = `DELETE FROM raw_leases WHERE name = $1 AND token = $2`
)

var rawToken atomic.Int64

func rawLeaseCycle(pool *pgxpool.Pool) benchwork.Cycle {
	return func(ctx context.Context, name string) error {
		tok := fmt.Sprint(rawToken.Add(1))
		var ok bool
		if err := pool.QueryRow(ctx, rawLeaseAcquire, name, tok).Scan(&ok); err != nil {
			return fmt.Errorf("raw lease acquire: %w", err)
		}
		_, err := pool.Exec(ctx, rawLeaseRelease, name, tok)
		return err
	}
}

// BenchmarkContended: 16 goroutines on one name, each pausing 1 ms after
// its release; each has its own Locker (as separate processes would) on
// one pool per implementation. The baseline is blocking
// pg_advisory_lock, the server queueing the waiters. Reports critical
// sections per second, handoff and wait times, fairness, round trips per
// critical section, and advisory mode's ratio to the baseline.
func BenchmarkContended(b *testing.B) {
	d := newDB(b)
	var base float64
	for _, im := range []struct {
		name string
		cfg  *pglock.Config
	}{{"raw-advisory-lock", nil}, {"advisory", &pglock.Config{Mode: pglock.Advisory}}, {"lease", &pglock.Config{}}} {
		pool, cnt := benchPool(b, d)
		b.Run(im.name, func(b *testing.B) {
			before := cnt.n.Load()
			c := contended(b, pool, im.cfg)
			c.Report(b)
			b.ReportMetric(float64(cnt.n.Load()-before)/float64(c.N), "rt/op")
			rate := float64(c.N) / c.Elapsed.Seconds()
			switch {
			case im.cfg == nil:
				base = rate
			case im.cfg.Mode == pglock.Advisory && base > 0:
				b.ReportMetric(rate/base, "x-baseline")
			}
		})
	}
}

const contenders = 16

func contended(b *testing.B, pool *pgxpool.Pool, cfg *pglock.Config) *benchwork.Contention {
	name := fmt.Sprintf("bench/contended/%d", time.Now().UnixNano())
	lock := rawBlockingLock(pool, pglock.Key(name))
	if cfg != nil {
		lockers := make([]*dlock.Locker, contenders)
		for i := range lockers {
			l, err := cfg.Locker(pool)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = l.Close() })
			lockers[i] = l
		}
		lock = benchwork.Acquire(lockers, name, dlock.WithTTL(5*time.Second), dlock.WithWait(time.Minute))
	}
	return benchwork.Contended(b, contenders, lock)
}

// rawBlockingLock is the contended baseline: pg_advisory_lock on a pooled
// connection (the server queues the waiters), pg_advisory_unlock on the
// same connection.
func rawBlockingLock(pool *pgxpool.Pool, key int64) benchwork.Lock {
	return func(ctx context.Context, _ int) (func(context.Context) error, error) {
		conn, err := pool.Acquire(ctx)
		if err != nil {
			return nil, err
		}
		if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", key); err != nil {
			conn.Release()
			return nil, err
		}
		return func(ctx context.Context) error {
			defer conn.Release()
			_, err := conn.Exec(ctx, "SELECT pg_advisory_unlock($1)", key)
			return err
		}, nil
	}
}
