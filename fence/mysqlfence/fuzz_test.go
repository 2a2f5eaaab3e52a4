package mysqlfence_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/fence"
	"github.com/dlockdev/dlock/fence/mysqlfence"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	"github.com/go-sql-driver/mysql"
)

// FuzzTableNames runs a fenced Upsert and InstallTrigger with fuzzed
// table and column names against a real MariaDB database holding a
// sentinel table. A name is either refused as an ErrInvalidArgument or
// used as a quoted identifier (the table's name also as a literal in the
// trigger): whatever the outcome, the sentinel survives untouched and
// carries no trigger (no name is ever read as SQL).
func FuzzTableNames(f *testing.F) {
	f.Add("docs", "id", "fence", "body")
	f.Add("docs`; DROP TABLE sentinel; --", "id", "fence", "body")
	f.Add("docs", "id`=1; DELETE FROM sentinel; --", "fence", "b")
	f.Add(`d\'); DROP TABLE sentinel; --`, "id", "", "x")
	f.Add("docs", "id", "fence` = 0 WHERE 1; DELETE FROM sentinel; --", "body")
	f.Add("docs", "id", "id", "body")
	f.Add("x' AS CHAR)); DROP TABLE sentinel; -- ", "id", "fence", "b")
	srv := testserver.MariaDB(f)
	db, err := sql.Open("mysql", srv.DSN(srv.NewDatabase(f)))
	if err != nil {
		f.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{
		`CREATE TABLE sentinel (v INT)`, `INSERT INTO sentinel VALUES (42)`,
		"CREATE TABLE docs (id VARCHAR(64) PRIMARY KEY, fence BIGINT NOT NULL, body TEXT)",
	} {
		if _, err := db.Exec(q); err != nil {
			f.Fatal(err)
		}
	}
	f.Fuzz(func(t *testing.T, table, key, fenceCol, col string) {
		if strings.Contains(strings.ToLower(table), "sentinel") || strings.Contains(table, ".") {
			t.Skip("names the sentinel or another schema: a legitimate target")
		}
		ctx := context.Background()
		tbl := mysqlfence.Table{Name: table, Key: key, Fence: fenceCol}
		err := tbl.Upsert(ctx, db, "k", 7, mysqlfence.Values{col: "v"})
		if errors.Is(err, fence.ErrStale) && !errors.Is(err, dlock.ErrInvalidArgument) {
			t.Fatalf("Upsert on a fresh row reported a stale fence: %v", err)
		}
		_ = mysqlfence.InstallTrigger(ctx, db, table, fenceCol)
		_ = mysqlfence.RemoveTrigger(ctx, db, table)
		var v, n, triggers int
		err = db.QueryRowContext(ctx, `SELECT v, (SELECT count(*) FROM sentinel),
			(SELECT count(*) FROM information_schema.TRIGGERS WHERE EVENT_OBJECT_SCHEMA = DATABASE() AND EVENT_OBJECT_TABLE = 'sentinel')
			FROM sentinel`).Scan(&v, &n, &triggers)
		if err != nil || n != 1 || v != 42 || triggers != 0 {
			t.Fatalf("sentinel changed by names %q %q %q %q: v=%d rows=%d triggers=%d err=%v", table, key, fenceCol, col, v, n, triggers, err)
		}
	})
}

// FuzzMapError maps server errors carrying fuzzed SQLSTATEs and messages
// (the message is text the trigger built from stored data): only the
// trigger's SQLSTATE with its message becomes a stale-fence error, which
// still unwraps to the *mysql.MySQLError; anything else is returned
// unchanged.
func FuzzMapError(f *testing.F) {
	f.Add(mysqlfence.SQLState, uint16(1644), mysqlfence.TriggerMessage+" offered=3 current=9 table=docs")
	f.Add(mysqlfence.SQLState, uint16(1644), mysqlfence.TriggerMessage+" offered=x current=")
	f.Add(mysqlfence.SQLState, uint16(1644), "some other signal")
	f.Add("23000", uint16(1062), "Duplicate entry")
	f.Add("", uint16(0), "")
	f.Fuzz(func(t *testing.T, state string, number uint16, msg string) {
		me := &mysql.MySQLError{Number: number, Message: msg}
		copy(me.SQLState[:], state)
		err := mysqlfence.MapError(me)
		var back *mysql.MySQLError
		if !errors.As(err, &back) || back != me {
			t.Fatalf("MapError lost the *mysql.MySQLError: %v", err)
		}
		want := string(me.SQLState[:]) == mysqlfence.SQLState && strings.HasPrefix(msg, mysqlfence.TriggerMessage)
		if stale := errors.Is(err, fence.ErrStale); stale != want {
			t.Fatalf("MapError(%q, %q): stale = %v", state, msg, stale)
		}
		_ = err.Error()
	})
}
