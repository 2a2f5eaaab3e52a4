package mysqllock_test

import (
	"context"
	"database/sql"
	"os"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/dlocktest"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	"github.com/dlockdev/dlock/mysqllock"
	_ "github.com/go-sql-driver/mysql"
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(envWaiter); spec != "" {
		os.Exit(waiterMain(spec))
	}
	dlocktest.Main(testserver.KeepShared(m))
}

// db is one fresh database on the shared test server, with an admin pool
// for reaching under the driver, and the schema created.
type db struct {
	srv  *testserver.MariaDBServer
	name string
	url  string
	sql  *sql.DB // shared by the Lockers of locker()
}

func newDB(t testing.TB) *db {
	t.Helper()
	srv := testserver.MariaDB(t)
	return onServer(t, srv)
}

// onServer makes a fresh, migrated database on srv.
func onServer(t testing.TB, srv *testserver.MariaDBServer) *db {
	t.Helper()
	name := srv.NewDatabase(t)
	d := &db{srv: srv, name: name, url: srv.URL(name), sql: openSQL(t, srv.DSN(name))}
	d.sql.SetMaxOpenConns(200)
	d.sql.SetMaxIdleConns(100)
	migrate(t, d.sql, mysqllock.Config{})
	return d
}

func openSQL(t testing.TB, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func migrate(t testing.TB, db *sql.DB, cfg mysqllock.Config) {
	t.Helper()
	l, err := cfg.Locker(db)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.Migrate(ctx(t)); err != nil {
		t.Fatalf("Migrate(%+v): %v", cfg, err)
	}
}

// locker opens a Locker of the given config on the database's shared pool.
func (d *db) locker(t testing.TB, cfg mysqllock.Config, opts ...dlock.Option) *dlock.Locker {
	t.Helper()
	l, err := cfg.Locker(d.sql, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// exec runs one statement under the driver, returning the rows it changed.
func (d *db) exec(t testing.TB, q string, args ...any) int64 {
	t.Helper()
	res, err := d.sql.ExecContext(ctx(t), q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	n, _ := res.RowsAffected()
	return n
}

// suiteTTL is the conformance suite's lease length: two seconds, for a
// loaded 2-core machine under -race.
const suiteTTL = 2 * time.Second

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}
