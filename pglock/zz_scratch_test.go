package pglock_test

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"sync"
	"sync/atomic"

	"github.com/dlockdev/dlock"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dlockdev/dlock/driver"
	"testing"
	"time"

	"github.com/dlockdev/dlock/pglock"
)

func TestScratchStatements(t *testing.T) {
	d := newDB(t)
	pool := newPool(t, d.url)
	migrate(t, pool, pglock.Config{Mode: pglock.Advisory})
	c := context.Background()
	conn, err := pool.Acquire(c)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	names := []string{"raw", "nextval", "full", "sub", "block", "until", "until2"}
	stmts := map[string]string{
		"raw":     `SELECT pg_try_advisory_lock($1)`,
		"nextval": `SELECT CASE WHEN pg_try_advisory_lock($1) THEN nextval('dlock_fences_seq') END, pg_backend_pid()`,
		"full":    `SELECT t.fence, pg_backend_pid(), x.pid, x.owner, x.fence FROM (SELECT CASE WHEN pg_try_advisory_lock($1) THEN nextval('dlock_fences_seq') END AS fence) t LEFT JOIN LATERAL (SELECT l.pid, h.owner, h.fence FROM pg_locks l LEFT JOIN dlock_fences_holders h ON h.pid = l.pid AND h.key = $1 WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) AND l.classid = ((($1::bigint) >> 32) & 4294967295)::oid AND l.objid = ($1::bigint & 4294967295)::oid AND t.fence IS NULL LIMIT 1) x ON true`,
		"block":   `SELECT nextval('dlock_fences_seq'), pg_backend_pid() FROM (SELECT pg_advisory_lock($1)) l`,
		"until":   `SELECT nextval('dlock_fences_seq'), pg_backend_pid() FROM (SELECT set_config('lock_timeout', '1000ms', true) AS t) c, LATERAL (SELECT pg_advisory_lock($1) WHERE c.t IS NOT NULL) l`,
		"until2":  `SELECT set_config('lock_timeout', '1000ms', true), pg_advisory_lock($1), nextval('dlock_fences_seq'), pg_backend_pid()`,
		"sub":     `SELECT t.fence, pg_backend_pid(), CASE WHEN t.fence IS NULL THEN (SELECT l.pid FROM pg_locks l WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) AND l.classid = ((($1::bigint) >> 32) & 4294967295)::oid AND l.objid = ($1::bigint & 4294967295)::oid LIMIT 1) END FROM (SELECT CASE WHEN pg_try_advisory_lock($1) THEN nextval('dlock_fences_seq') END AS fence) t`,
		"full2":   `SELECT t.fence, pg_backend_pid(), x.pid, x.owner, x.fence FROM (SELECT CASE WHEN pg_try_advisory_lock($1) THEN nextval('dlock_fences_seq') END AS fence) t LEFT JOIN LATERAL (SELECT l.pid, h.owner, h.fence FROM pg_locks l LEFT JOIN dlock_fences_holders h ON h.pid = l.pid AND h.key = $1 WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) AND l.classid = ((($1::bigint) >> 32) & 4294967295)::oid AND l.objid = ($1::bigint & 4294967295)::oid AND t.fence IS NULL LIMIT 1) x ON true`,
	}
	tot := map[string]time.Duration{}
	n := 8000
	for i := 0; i < n; i++ {
		for _, name := range names {
			q := stmts[name]
			start := time.Now()
			rows, err := conn.Query(c, q, int64(i))
			if err != nil {
				t.Fatal(err)
			}
			rows.Close()
			if rows.Err() != nil {
				t.Fatal(rows.Err())
			}
			tot[name] += time.Since(start)
			var ok bool
			if err := conn.QueryRow(c, `SELECT pg_advisory_unlock($1)`, int64(i)).Scan(&ok); err != nil {
				t.Fatal(err)
			}
		}
		if i == n/2 {
			if _, err := conn.Exec(c, "SET plan_cache_mode = force_generic_plan"); err != nil {
				t.Fatal(err)
			}
			for _, name := range names {
				t.Logf("custom: %s %v", name, tot[name]/time.Duration(n/2))
				tot[name] = 0
			}
		}
	}
	for _, name := range names {
		t.Logf("generic: %s %v", name, tot[name]/time.Duration(n/2))
	}
}

func BenchmarkScratchDlock(b *testing.B) {
	d := newDB(b)
	pool := newPool(b, d.url+"&pool_max_conns=8")
	warm(b, pool, 4)
	l, err := pglock.Config{Mode: pglock.Advisory}.Locker(pool)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	c := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ls, err := l.TryAcquire(c, "x")
		if err != nil {
			b.Fatal(err)
		}
		if err := ls.Release(c); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkScratchRaw(b *testing.B) {
	d := newDB(b)
	pool := newPool(b, d.url+"&pool_max_conns=8")
	warm(b, pool, 4)
	c := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var ok bool
		if err := pool.QueryRow(c, `SELECT pg_try_advisory_lock($1)`, int64(7)).Scan(&ok); err != nil {
			b.Fatal(err)
		}
		if err := pool.QueryRow(c, `SELECT pg_advisory_unlock($1)`, int64(7)).Scan(&ok); err != nil {
			b.Fatal(err)
		}
	}
}

func TestScratchSplit(t *testing.T) {
	d := newDB(t)
	pool := newPool(t, d.url+"&pool_max_conns=8")
	warm(t, pool, 4)
	l, err := pglock.Config{Mode: pglock.Advisory}.Locker(pool)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c := context.Background()
	drv, err := pglock.Config{Mode: pglock.Advisory}.Driver(pool)
	if err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 3; round++ {
		var da, dr time.Duration
		for i := 0; i < 3000; i++ {
			s := time.Now()
			tok := fmt.Sprint("tok", round, i)
			g, err := drv.TryAcquire(c, driver.Request{Name: "y", Token: tok, Owner: "me", TTL: 10 * time.Second})
			if err != nil || !g.Acquired {
				t.Fatal(err, g)
			}
			m := time.Now()
			if err := drv.Release(c, "y", tok); err != nil {
				t.Fatal(err)
			}
			da += m.Sub(s)
			dr += time.Since(m)
		}
		t.Logf("driver acquire %v release %v; pool %v grant %v query %v", da/3000, dr/3000, 0, 0, 0)

		if round == 1 {
			if _, err := l.TryAcquire(c, "background"); err != nil {
				t.Fatal(err)
			}
		}
		var ta, tr, ra, rr time.Duration
		n := 3000
		for i := 0; i < n; i++ {
			s := time.Now()
			ls, err := l.TryAcquire(c, "x")
			if err != nil {
				t.Fatal(err)
			}
			m := time.Now()
			if err := ls.Release(c); err != nil {
				t.Fatal(err)
			}
			e := time.Now()
			ta += m.Sub(s)
			tr += e.Sub(m)
			var ok bool
			s = time.Now()
			conn, _ := pool.Acquire(c)
			if err := conn.QueryRow(c, `SELECT pg_try_advisory_lock($1)`, int64(7)).Scan(&ok); err != nil {
				t.Fatal(err)
			}
			m = time.Now()
			if err := conn.QueryRow(c, `SELECT pg_advisory_unlock($1)`, int64(7)).Scan(&ok); err != nil {
				t.Fatal(err)
			}
			conn.Release()
			e = time.Now()
			ra += m.Sub(s)
			rr += e.Sub(m)
		}
		t.Logf("dlock acquire %v release %v; raw try %v unlock %v", ta/time.Duration(n), tr/time.Duration(n), ra/time.Duration(n), rr/time.Duration(n))
	}
}

func BenchmarkScratchDlockPar(b *testing.B) {
	d := newDB(b)
	pool := newPool(b, d.url+"&pool_max_conns=20")
	warm(b, pool, 16)
	l, err := pglock.Config{Mode: pglock.Advisory}.Locker(pool)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	c := context.Background()
	var next atomic.Int64
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		name := fmt.Sprint("n", next.Add(1))
		for pb.Next() {
			ls, err := l.TryAcquire(c, name)
			if err != nil {
				b.Error(err)
				return
			}
			if err := ls.Release(c); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func TestScratchContended(t *testing.T) {
	d := newDB(t)
	cfg, _ := pgxpool.ParseConfig(d.url + "&pool_max_conns=4")
	tr := &sqlCount{m: map[string]int{}}
	cfg.ConnConfig.Tracer = tr
	pool, _ := pgxpool.NewWithConfig(context.Background(), cfg)
	defer pool.Close()
	c, cancelC := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancelC()
	var ops atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		l, err := pglock.Config{Mode: pglock.Advisory}.Locker(pool)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				ls, err := l.Acquire(c, "hot", dlock.WithWait(dlock.Forever))
				if err != nil {
					t.Error(err)
					return
				}
				ops.Add(1)
				if err := ls.Release(c); err != nil {
					t.Error(err)
					return
				}
				time.Sleep(time.Millisecond)
			}
		}()
	}
	f, _ := os.Create("/tmp/bench/c.prof")
	pprof.StartCPUProfile(f)
	time.Sleep(5 * time.Second)
	pprof.StopCPUProfile()
	close(stop)
	wg.Wait()
	t.Logf("%d ops in 5s", ops.Load())
	tr.mu.Lock()
	for k, v := range tr.m {
		t.Logf("%8d %.80q", v, k)
	}
	tr.mu.Unlock()
}

type sqlCount struct {
	mu sync.Mutex
	m  map[string]int
}

func (c *sqlCount) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	c.mu.Lock()
	c.m[d.SQL]++
	c.mu.Unlock()
	return ctx
}

func (c *sqlCount) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func TestScratchRounds(t *testing.T) {
	d := newDB(t)
	pool := newPool(t, d.url+"&pool_max_conns=32")
	var lockers []*dlock.Locker
	for i := 0; i < 16; i++ {
		l, err := pglock.Config{Mode: pglock.Advisory}.Locker(pool)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		lockers = append(lockers, l)
	}
	for r := 0; r < 4; r++ {
		c, cancel := context.WithTimeout(context.Background(), time.Second)
		var wg sync.WaitGroup
		counts := make([]int, 16)
		var fails atomic.Int64
		for i, l := range lockers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for c.Err() == nil {
					ls, err := l.Acquire(c, "hot", dlock.WithWait(dlock.Forever))
					if err != nil {
						if c.Err() == nil {
							if fails.Add(1) < 4 {
								t.Logf("err: %v", err)
							}
						}
						continue
					}
					counts[i]++
					if err := ls.Release(context.Background()); err != nil {
						t.Error(err)
						return
					}
					time.Sleep(time.Millisecond)
				}
			}()
		}
		wg.Wait()
		cancel()
		st := pool.Stat()
		t.Logf("round %d: counts %v fails %d; pool total %d acquired %d idle %d", r, counts, fails.Load(), st.TotalConns(), st.AcquiredConns(), st.IdleConns())
		var held []string
		rows, _ := d.admin.Query(context.Background(), "SELECT l.pid::text || ':' || l.granted::text || ':' || coalesce(a.state,'-') || ':' || coalesce(left(a.query, 60),'-') || ':' || coalesce(a.backend_start::text,'') FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.locktype='advisory'")
		for rows.Next() {
			var s string
			rows.Scan(&s)
			held = append(held, s)
		}
		rows.Close()
		t.Logf("advisory locks now: %v", held)
	}
}
