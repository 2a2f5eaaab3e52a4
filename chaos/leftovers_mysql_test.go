package chaos

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"testing"

	"github.com/dlockdev/dlock/mysqllock"
	"github.com/go-sql-driver/mysql"
)

// mysqlLeftovers lists what a mysqllock database keeps for name: a lease
// row with a token (lease mode), a GET_LOCK lock on its key and rows of
// the holders table (get_lock mode).
func mysqlLeftovers(t *testing.T, ctx context.Context, rawURL, name string) []string {
	db := openMySQL(t, mysqlDSN(t, rawURL))
	defer db.Close()
	var tokens, locks, holders int
	err := db.QueryRowContext(ctx, `SELECT
		(SELECT count(*) FROM dlock_leases WHERE name = ? AND token IS NOT NULL),
		IS_USED_LOCK(?) IS NOT NULL,
		(SELECT count(*) FROM dlock_leases_holders WHERE name = ?)`, name, mysqllock.Key(name), name).Scan(&tokens, &locks, &holders)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range []struct {
		n    int
		what string
	}{{tokens, "lease rows with a token"}, {locks, "GET_LOCK locks"}, {holders, "holders rows"}} {
		if c.n > 0 {
			out = append(out, fmt.Sprintf("%d %s", c.n, c.what))
		}
	}
	return out
}

// mysqlDSN turns a mysqllock URL of a test server (no password, TCP)
// into a go-sql-driver/mysql DSN of the same database.
func mysqlDSN(t testing.TB, rawURL string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr, cfg.DBName = u.User.Username(), "tcp", u.Host, u.Path[1:]
	return cfg.FormatDSN()
}

func openMySQL(t testing.TB, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	return db
}
