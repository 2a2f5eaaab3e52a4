package pglock_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/dlocktest"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	"github.com/dlockdev/dlock/pglock"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// envInner marks the test binary as re-executed by TestMain, with
// DLOCK_URL naming the Examples' database.
const envInner = "DLOCK_PGLOCK_TEST_INNER"

// TestMain starts the Postgres server and database that the Examples
// reach through DLOCK_URL and runs the tests and Examples in a child
// process (testserver.Reexec).
func TestMain(m *testing.M) {
	if os.Getenv(envInner) != "" {
		dlocktest.Main(testserver.KeepShared(m))
	}
	os.Exit(testserver.Reexec(envInner, func(tb testing.TB) string { return testserver.Postgres(tb).NewDatabase(tb) }))
}

// db is one fresh database on the shared test server, with an admin pool
// for reaching under the driver, and the lease and fence tables created.
type db struct {
	url   string
	admin *pgxpool.Pool
	pool  *pgxpool.Pool // warmed, shared by the Lockers of locker()
}

func newDB(t testing.TB) *db {
	t.Helper()
	url := testserver.Postgres(t).NewDatabase(t)
	d := &db{url: url, admin: newPool(t, url), pool: newPool(t, url+"&pool_max_conns=40")}
	warm(t, d.pool, 20)
	for _, m := range []pglock.Mode{pglock.Lease, pglock.Advisory} {
		migrate(t, d.admin, pglock.Config{Mode: m})
	}
	return d
}

func newPool(t testing.TB, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatalf("pgxpool.New: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// tracedPool opens a pool on url whose statements tr sees, with n
// connections warmed.
func tracedPool(t testing.TB, url string, tr pgx.QueryTracer, n int) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.Tracer = tr
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	warm(t, pool, n)
	return pool
}

// warm opens n connections now, so that dialing (a process fork on the
// server, seconds on a loaded machine) is not counted against the first
// leases' TTL.
func warm(t testing.TB, pool *pgxpool.Pool, n int) {
	t.Helper()
	conns := make([]*pgxpool.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	for range n {
		c, err := pool.Acquire(ctx(t))
		if err != nil {
			t.Fatalf("warm pool: %v", err)
		}
		conns = append(conns, c)
	}
}

func migrate(t testing.TB, pool *pgxpool.Pool, cfg pglock.Config) {
	t.Helper()
	l, err := cfg.Locker(pool)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.Migrate(ctx(t)); err != nil {
		t.Fatalf("Migrate(%+v): %v", cfg, err)
	}
}

// locker opens a Locker of the given mode on the database's shared pool.
// Lockers sharing a pool are as independent as Lockers in separate
// processes (each advisory lease pins its own connection, and a connection
// goes back to the pool only unlocked); a pool of its own would have to be
// dialed, which on a loaded machine takes long enough to distort the
// suite's sub-second timings.
func (d *db) locker(t testing.TB, cfg pglock.Config, opts ...dlock.Option) *dlock.Locker {
	t.Helper()
	l, err := cfg.Locker(d.pool, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// exec runs one statement as the administrator.
func (d *db) exec(t testing.TB, sql string, args ...any) int64 {
	t.Helper()
	tag, err := d.admin.Exec(ctx(t), sql, args...)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return tag.RowsAffected()
}

// suiteTTL is the conformance suite's lease length: two seconds rather than
// the default half second. Under -race on a loaded 2-core machine, a herd
// of 31 waiters woken by one NOTIFY can hold the winner's grant statement
// up for hundreds of milliseconds, and the lease counts from when the
// attempt was sent.
const suiteTTL = 2 * time.Second

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}
