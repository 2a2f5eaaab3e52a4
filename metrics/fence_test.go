package metrics_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/dlockdev/dlock/fence/mysqlfence"
	_ "github.com/go-sql-driver/mysql"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/fence"
	"github.com/dlockdev/dlock/fence/pgfence"
	"github.com/dlockdev/dlock/fence/redisfence"
	"github.com/dlockdev/dlock/fence/sqlitefence"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	"github.com/dlockdev/dlock/metrics"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	_ "modernc.org/sqlite"
)

// grants returns the fences of two successive grants of one lock: the
// first holder was force-released, so its fence is stale once the second
// has written.
func grants(t *testing.T) (stale, current uint64) {
	t.Helper()
	ctx := context.Background()
	l := instrumented(t, backends[0].server(t))
	a, err := l.Acquire(ctx, "fenced", dlock.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := l.ForceRelease(ctx, "fenced"); err != nil {
		t.Fatal(err)
	}
	<-a.Done()
	b, err := l.Acquire(ctx, "fenced")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release(ctx)
	return a.Fence(), b.Fence()
}

// stale fails unless err is a fence rejection.
func stale(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, fence.ErrStale) {
		t.Fatalf("%s: %v, want fence.ErrStale", what, err)
	}
}

// TestFenceRejections: a stale write refused by each guard, in the store
// itself, counts once under the guard's store; writes that are refused
// for another reason (invalid fence, missing row) do not count.
func TestFenceRejections(t *testing.T) {
	for _, c := range []struct {
		store string
		run   func(t *testing.T, old, cur uint64) (rejections int)
	}{
		{"memory", memoryRejections},
		{"sqlite", sqliteRejections},
		{"redis", redisRejections},
		{"postgres", postgresRejections},
		{"mysql", mysqlRejections},
	} {
		t.Run(c.store, func(t *testing.T) {
			old, cur := grants(t)
			reg := prometheus.NewRegistry()
			if err := metrics.InstrumentFences(reg); err != nil {
				t.Fatal(err)
			}
			n := c.run(t, old, cur)
			for _, s := range []string{"memory", "mysql", "postgres", "redis", "sqlite"} {
				w := 0.0
				if s == c.store {
					w = float64(n)
				}
				want(t, reg, "dlock_fence_rejected_total", labels{"store": s}, w)
			}
		})
	}
}

func memoryRejections(t *testing.T, old, cur uint64) int {
	var g fence.Guard
	if err := g.Do("doc", cur, func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	stale(t, "Admit with the stale fence", g.Admit("doc", old))
	stale(t, "Do with the stale fence", g.Do("doc", old, func() error { return nil }))
	if err := g.Admit("doc", 0); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Fatalf("fence 0: %v", err)
	}
	return 2
}

func sqliteRejections(t *testing.T, old, cur uint64) int {
	ctx := context.Background()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "f.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE docs (id TEXT PRIMARY KEY, fence INTEGER NOT NULL, body TEXT)`); err != nil {
		t.Fatal(err)
	}
	docs := sqlitefence.Table{Name: "docs", Key: "id"}
	if err := docs.Upsert(ctx, db, "x", cur, sqlitefence.Values{"body": "new"}); err != nil {
		t.Fatal(err)
	}
	stale(t, "Update with the stale fence", docs.Update(ctx, db, "x", old, sqlitefence.Values{"body": "old"}))
	stale(t, "Upsert with the stale fence", docs.Upsert(ctx, db, "x", old, sqlitefence.Values{"body": "old"}))
	if err := docs.Update(ctx, db, "missing", cur, nil); !errors.Is(err, sql.ErrNoRows) {
		t.Fatalf("Update of a missing row: %v", err)
	}
	if err := docs.Update(ctx, db, "x", 0, nil); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Fatalf("fence 0: %v", err)
	}
	// The trigger refuses an unfenced UPDATE; MapError, applied twice, counts it once.
	if err := sqlitefence.InstallTrigger(ctx, db, "docs", ""); err != nil {
		t.Fatal(err)
	}
	_, err = db.ExecContext(ctx, `UPDATE docs SET body = 'raw', fence = ? WHERE id = 'x'`, int64(old))
	stale(t, "raw UPDATE with the stale fence", sqlitefence.MapError(sqlitefence.MapError(err)))
	return 3
}

func redisRejections(t *testing.T, old, cur uint64) int {
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: testserver.Redis(t).Addr})
	defer c.Close()
	g, err := redisfence.New(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Set(ctx, "doc", cur, "new"); err != nil {
		t.Fatal(err)
	}
	stale(t, "Set with the stale fence", g.Set(ctx, "doc", old, "old"))
	if err := g.Set(ctx, "doc", 0, "zero"); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Fatalf("fence 0: %v", err)
	}
	if v, f, _, err := g.Get(ctx, "doc"); err != nil || v != "new" || f != cur {
		t.Fatalf("after the stale write: %q, fence %d, %v", v, f, err)
	}
	return 1
}

func postgresRejections(t *testing.T, old, cur uint64) int {
	ctx := context.Background()
	p, err := pgxpool.New(ctx, testserver.Postgres(t).NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := p.Exec(ctx, `CREATE TABLE docs (id text PRIMARY KEY, fence bigint NOT NULL, body text)`); err != nil {
		t.Fatal(err)
	}
	docs := pgfence.Table{Name: "docs", Key: "id"}
	if err := docs.Upsert(ctx, p, "x", cur, pgfence.Values{"body": "new"}); err != nil {
		t.Fatal(err)
	}
	stale(t, "Update with the stale fence", docs.Update(ctx, p, "x", old, pgfence.Values{"body": "old"}))
	if err := docs.Update(ctx, p, "missing", cur, nil); !errors.Is(err, pgx.ErrNoRows) {
		t.Fatalf("Update of a missing row: %v", err)
	}
	if err := pgfence.InstallTrigger(ctx, p, "docs", ""); err != nil {
		t.Fatal(err)
	}
	_, err = p.Exec(ctx, `UPDATE docs SET body = 'raw', fence = $1 WHERE id = 'x'`, int64(old))
	stale(t, "raw UPDATE with the stale fence", pgfence.MapError(pgfence.MapError(err)))
	return 2
}

func mysqlRejections(t *testing.T, old, cur uint64) int {
	ctx := context.Background()
	srv := testserver.MariaDB(t)
	db, err := sql.Open("mysql", srv.DSN(srv.NewDatabase(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("CREATE TABLE docs (id VARCHAR(64) PRIMARY KEY, fence BIGINT NOT NULL, body TEXT) ENGINE=InnoDB"); err != nil {
		t.Fatal(err)
	}
	docs := mysqlfence.Table{Name: "docs", Key: "id"}
	if err := docs.Upsert(ctx, db, "x", cur, mysqlfence.Values{"body": "new"}); err != nil {
		t.Fatal(err)
	}
	stale(t, "Update with the stale fence", docs.Update(ctx, db, "x", old, mysqlfence.Values{"body": "old"}))
	stale(t, "Upsert with the stale fence", docs.Upsert(ctx, db, "x", old, mysqlfence.Values{"body": "old"}))
	if err := docs.Update(ctx, db, "x", 0, nil); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Fatalf("fence 0: %v", err)
	}
	// The trigger refuses an unfenced UPDATE; MapError, applied twice, counts it once.
	if err := mysqlfence.InstallTrigger(ctx, db, "docs", ""); err != nil {
		t.Fatal(err)
	}
	_, err = db.ExecContext(ctx, "UPDATE docs SET body = 'raw', fence = ? WHERE id = 'x'", int64(old))
	stale(t, "raw UPDATE with the stale fence", mysqlfence.MapError(mysqlfence.MapError(err)))
	return 3
}
