package sqlitefence_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/fence"
	"github.com/dlockdev/dlock/fence/sqlitefence"
	_ "modernc.org/sqlite"
)

// FuzzTableNames runs a fenced Upsert with fuzzed table and column names
// against a real in-memory SQLite database holding a sentinel table. A
// name is either refused as an ErrInvalidArgument or used as a quoted
// identifier: whatever the outcome, the sentinel survives untouched (no
// name is ever read as SQL).
func FuzzTableNames(f *testing.F) {
	f.Add("docs", "id", "fence", "body")
	f.Add(`docs"; DROP TABLE sentinel; --`, "id", "fence", "body")
	f.Add("main.docs", "id", "", "x")
	f.Add("docs", "id", "id", "body")
	f.Add("docs", `id"=1; DELETE FROM sentinel; --`, "fence", "b")
	f.Fuzz(func(t *testing.T, table, key, fenceCol, col string) {
		if strings.Contains(strings.ToLower(table), "sentinel") {
			t.Skip("names the sentinel itself: a legitimate target")
		}
		ctx := context.Background()
		db, err := sql.Open("sqlite", ":memory:")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		db.SetMaxOpenConns(1) // one connection: one in-memory database
		if _, err := db.ExecContext(ctx, `CREATE TABLE sentinel (v INTEGER); INSERT INTO sentinel VALUES (42)`); err != nil {
			t.Fatal(err)
		}
		tbl := sqlitefence.Table{Name: table, Key: key, Fence: fenceCol}
		err = tbl.Upsert(ctx, db, "k", 7, sqlitefence.Values{col: "v"})
		if errors.Is(err, fence.ErrStale) && !errors.Is(err, dlock.ErrInvalidArgument) {
			t.Fatalf("Upsert on a fresh database reported a stale fence: %v", err)
		}
		var v, n int
		err = db.QueryRowContext(ctx, `SELECT v, (SELECT count(*) FROM sentinel) FROM sentinel`).Scan(&v, &n)
		if err != nil || n != 1 || v != 42 {
			t.Fatalf("sentinel changed by names %q %q %q %q: v=%d rows=%d err=%v", table, key, fenceCol, col, v, n, err)
		}
	})
}
