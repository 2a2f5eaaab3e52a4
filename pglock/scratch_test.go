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
	"github.com/jackc/pgx/v5/pgxpool"
)

var tokN atomic.Int64

func BenchmarkScratch(b *testing.B) {
	d := newDB(b)
	rp, rc := benchPool(b, d)
	dp, dc := benchPool(b, d)
	lp, lc := benchPool(b, d)
	sp, sc := benchPool(b, d)
	drv, _ := pglock.Config{Mode: pglock.Advisory}.Driver(dp)
	l, _ := pglock.Config{Mode: pglock.Advisory}.Locker(lp)
	defer l.Close()
	drvCycle := func(ctx context.Context, name string) error {
		tok := fmt.Sprint(tokN.Add(1))
		g, err := drv.TryAcquire(ctx, driver.Request{Name: name, Token: tok, Owner: "o", TTL: time.Minute})
		if err != nil || !g.Acquired {
			return fmt.Errorf("%v %v", g, err)
		}
		return drv.Release(ctx, name, tok)
	}
	sides := []*side{{cycle: rawCycle(rp), count: rc}, {cycle: drvCycle, count: dc},
		{cycle: benchwork.AcquireRelease(l, dlock.WithTTL(10*time.Second), dlock.WithAutoRefresh(false)), count: lc},
		{cycle: cyc(sp, leanQ), count: sc}}
	names := []string{"raw", "driver", "locker", "leanstmt"}
	for _, g := range []int{1, 16} {
		b.Run(fmt.Sprint(g), func(b *testing.B) {
			for _, s := range sides {
				*s = side{cycle: s.cycle, count: s.count}
			}
			chunk := max(b.N/20, g*4)
			for done := 0; done < b.N; done += chunk {
				for i, s := range sides {
					s.run(b, chunk, g, "s/"+names[i]+"/")
				}
			}
			for i, s := range sides {
				b.ReportMetric(s.rate()/sides[0].rate(), names[i]+"/raw")
			}
		})
	}
}

func cyc(pool *pgxpool.Pool, q string) benchwork.Cycle {
	return func(ctx context.Context, name string) error {
		conn, err := pool.Acquire(ctx)
		if err != nil {
			return err
		}
		defer conn.Release()
		var ok bool
		if err := conn.QueryRow(ctx, q, pglock.Key(name)).Scan(&ok); err != nil {
			return err
		}
		_, err = conn.Exec(ctx, "SELECT pg_advisory_unlock($1)", pglock.Key(name))
		return err
	}
}

const leanQ = `SELECT t.fence IS NOT NULL FROM (SELECT CASE WHEN pg_try_advisory_lock($1) THEN nextval('dlock_fences_seq') END AS fence) t
LEFT JOIN LATERAL (
	SELECT l.pid, h.owner, h.fence FROM pg_locks l LEFT JOIN dlock_fences_holders h ON h.pid = l.pid AND h.key = $1
	WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted
		AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
		AND l.classid = ((($1::bigint) >> 32) & 4294967295)::oid AND l.objid = ($1::bigint & 4294967295)::oid AND t.fence IS NULL
	LIMIT 1) x ON true`

func BenchmarkScratchContended(b *testing.B) {
	d := newDB(b)
	for _, im := range []string{"raw", "driver", "locker"} {
		pool, _ := benchPool(b, d)
		b.Run(im, func(b *testing.B) {
			name := fmt.Sprintf("c/%d", time.Now().UnixNano())
			lock := rawBlockingLock(pool, pglock.Key(name))
			switch im {
			case "driver":
				drv, _ := pglock.Config{Mode: pglock.Advisory}.Driver(pool)
				q := drv.(driver.Queuer)
				lock = func(ctx context.Context, _ int) (func(context.Context) error, error) {
					tok := fmt.Sprint(tokN.Add(1))
					g, err := q.AcquireWait(ctx, driver.Request{Name: name, Token: tok, Owner: "o", TTL: time.Minute})
					if err != nil || !g.Acquired {
						return nil, fmt.Errorf("%v %v", g, err)
					}
					return func(ctx context.Context) error { return drv.Release(ctx, name, tok) }, nil
				}
			case "locker":
				return
			}
			benchwork.Contended(b, contenders, lock).Report(b)
		})
	}
}
