package pglock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	osexec "os/exec" // exec is a helper of these tests
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/dlocktest"
	"github.com/dlockdev/dlock/internal/testserver"
	"github.com/dlockdev/dlock/pglock"
	"github.com/jackc/pgx/v5/pgxpool"
)

// envInner marks the test binary as re-executed by TestMain, with
// DLOCK_URL naming the Examples' server.
const envInner = "DLOCK_PGLOCK_TEST_INNER"

// TestMain starts the PostgreSQL server that the Examples reach through
// DLOCK_URL, runs the tests and Examples in a child process (this test
// binary again, with the same flags) and stops the server when the child
// has exited: dlocktest.Main, which checks for leaked goroutines, ends the
// process it runs in, so no clean-up could follow it there. The tests
// themselves use the child's own shared server (testserver.Postgres).
func TestMain(m *testing.M) {
	if os.Getenv(envInner) != "" {
		dlocktest.Main(m)
	}
	os.Exit(runWithServer(func(tb testing.TB) string { return testserver.NewPostgres(tb).URL() }))
}

// runWithServer starts a server with start, re-executes the test binary
// with DLOCK_URL set to the server's URL, stops the server, and returns
// the child's exit code. Without the server binaries (testserver skips)
// the child runs without DLOCK_URL and without the Examples.
func runWithServer(start func(testing.TB) string) int {
	tb := &mainTB{}
	defer tb.cleanup()
	args := os.Args[1:]
	env := append(os.Environ(), envInner+"=1")
	url, stop := tb.start(start)
	switch {
	case stop == nil:
		env = append(env, "DLOCK_URL="+url)
	case stop.skip:
		fmt.Fprintf(os.Stderr, "examples skipped: %s\n", stop.msg)
		args = append(args, "-test.skip=^Example")
	default:
		fmt.Fprintf(os.Stderr, "TestMain: %s\n", stop.msg)
		return 1
	}
	cmd := osexec.Command(os.Args[0], args...)
	cmd.Env, cmd.Stdin, cmd.Stdout, cmd.Stderr = env, os.Stdin, os.Stdout, os.Stderr
	err := cmd.Run()
	var exit *osexec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "TestMain: run the tests: %v\n", err)
		return 1
	}
	return 0
}

// mainTB is the testing.TB that internal/testserver needs, outside any
// test: it collects clean-ups, and turns Fatal and Skip into a panic that
// start recovers. The embedded TB is nil: a method testserver starts to
// use that mainTB lacks panics rather than misbehaving quietly.
type mainTB struct {
	testing.TB
	cleanups []func()
}

// stopped is why a server could not start.
type stopped struct {
	msg  string
	skip bool
}

func (tb *mainTB) start(f func(testing.TB) string) (url string, stop *stopped) {
	defer func() {
		if r := recover(); r != nil {
			s, ok := r.(stopped)
			if !ok {
				panic(r)
			}
			stop = &s
		}
	}()
	return f(tb), nil
}

func (tb *mainTB) cleanup() {
	for i := len(tb.cleanups) - 1; i >= 0; i-- {
		tb.cleanups[i]()
	}
}

func (tb *mainTB) Helper()          {}
func (tb *mainTB) Name() string     { return "TestMain" }
func (tb *mainTB) Cleanup(f func()) { tb.cleanups = append(tb.cleanups, f) }
func (tb *mainTB) Fatal(args ...any) {
	panic(stopped{msg: fmt.Sprint(args...)})
}
func (tb *mainTB) Fatalf(format string, args ...any) {
	panic(stopped{msg: fmt.Sprintf(format, args...)})
}
func (tb *mainTB) Skipf(format string, args ...any) {
	panic(stopped{msg: fmt.Sprintf(format, args...), skip: true})
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
