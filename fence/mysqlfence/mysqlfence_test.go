package mysqlfence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/dlocktest"
	"github.com/dlockdev/dlock/fence"
	"github.com/dlockdev/dlock/fence/internal/fencetest"
	"github.com/dlockdev/dlock/fence/mysqlfence"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	"github.com/go-sql-driver/mysql"
)

func TestMain(m *testing.M) { dlocktest.Main(testserver.KeepShared(m)) }

var docs = mysqlfence.Table{Name: "docs", Key: "id"}

const docsTable = `CREATE TABLE docs (id VARCHAR(64) PRIMARY KEY, fence BIGINT NOT NULL, body TEXT) ENGINE=InnoDB`

// open returns a pool on a fresh database holding the docs table; params
// are extra DSN parameters ("clientFoundRows=true").
func open(t *testing.T, params ...string) *sql.DB {
	t.Helper()
	srv := testserver.MariaDB(t)
	dsn := srv.DSN(srv.NewDatabase(t))
	if len(params) > 0 {
		dsn += "?" + strings.Join(params, "&")
	}
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	exec(t, db, docsTable)
	return db
}

func exec(t *testing.T, db *sql.DB, q string, args ...any) {
	t.Helper()
	if _, err := db.Exec(q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func read(db *sql.DB, id string) func(context.Context) (string, uint64, bool, error) {
	return func(ctx context.Context) (string, uint64, bool, error) {
		var v string
		var f uint64
		err := db.QueryRowContext(ctx, `SELECT body, fence FROM docs WHERE id = ?`, id).Scan(&v, &f)
		if errors.Is(err, sql.ErrNoRows) {
			return "", 0, false, nil
		}
		return v, f, err == nil, err
	}
}

// upsertRule runs the shared rule tests with Upsert on a pool opened with
// params.
func upsertRule(params ...string) func(t *testing.T) {
	return func(t *testing.T) {
		db := open(t, params...)
		n := 0
		fencetest.Run(t, func(t *testing.T) fencetest.Store {
			n++
			id := fmt.Sprint(n)
			return fencetest.Store{
				Write: func(ctx context.Context, f uint64, v string) error {
					return docs.Upsert(ctx, db, id, f, mysqlfence.Values{"body": v})
				},
				Read: read(db, id),
			}
		})
	}
}

// testUpdateInTxRule runs every write as Update inside its own
// REPEATABLE READ transaction (InnoDB's default), as a caller would.
func testUpdateInTxRule(t *testing.T) {
	db := open(t)
	n := 0
	fencetest.Run(t, func(t *testing.T) fencetest.Store {
		n++
		id := fmt.Sprint(n)
		exec(t, db, `INSERT INTO docs VALUES (?, 1, '1/0/0')`, id)
		return fencetest.Store{
			Write: func(ctx context.Context, f uint64, v string) error {
				return inTx(ctx, db, func(tx *sql.Tx) error {
					return docs.Update(ctx, tx, id, f, mysqlfence.Values{"body": v})
				})
			},
			Read: read(db, id),
		}
	})
}

// inTx runs fn in a transaction, committed only if fn succeeds.
func inTx(ctx context.Context, db *sql.DB, fn func(*sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		return errors.Join(err, tx.Rollback())
	}
	return tx.Commit()
}

// testTriggerRule fences writers that use plain UPDATEs without the fenced
// WHERE clause: only the trigger stands between them and the row.
func testTriggerRule(t *testing.T) {
	db := open(t)
	ctx := context.Background()
	if err := mysqlfence.InstallTrigger(ctx, db, "docs", ""); err != nil {
		t.Fatal(err)
	}
	n := 0
	fencetest.Run(t, func(t *testing.T) fencetest.Store {
		n++
		id := fmt.Sprint(n)
		exec(t, db, `INSERT INTO docs VALUES (?, 1, '1/0/0')`, id)
		return fencetest.Store{
			Write: func(ctx context.Context, f uint64, v string) error {
				_, err := db.ExecContext(ctx, `UPDATE docs SET body = ?, fence = ? WHERE id = ?`, v, f, id)
				return mysqlfence.MapError(err)
			},
			Read: read(db, id),
		}
	})
}

// testSameValues writes the stored values again under the same fence: the
// server changes no row, and without clientFoundRows reports 0 affected
// rows; the write must still be accepted, with either DSN setting.
func testSameValues(t *testing.T) {
	ctx := context.Background()
	for _, params := range [][]string{nil, {"clientFoundRows=true"}} {
		db := open(t, params...)
		for i := range 3 {
			if err := docs.Upsert(ctx, db, "x", 34, mysqlfence.Values{"body": "same"}); err != nil {
				t.Fatalf("%v: Upsert %d of the same values under fence 34: %v", params, i, err)
			}
			if err := docs.Update(ctx, db, "x", 34, mysqlfence.Values{"body": "same"}); err != nil {
				t.Fatalf("%v: Update %d of the same values under fence 34: %v", params, i, err)
			}
		}
		if err := docs.Update(ctx, db, "x", 33, mysqlfence.Values{"body": "same"}); !errors.Is(err, fence.ErrStale) {
			t.Fatalf("%v: Update of the same values under the lower fence 33: %v, want ErrStale", params, err)
		}
		if err := docs.Upsert(ctx, db, "x", 33, mysqlfence.Values{"body": "same"}); !errors.Is(err, fence.ErrStale) {
			t.Fatalf("%v: Upsert of the same values under the lower fence 33: %v, want ErrStale", params, err)
		}
	}
}

func testUpdateMissingRow(t *testing.T) {
	db := open(t)
	err := docs.Update(context.Background(), db, "nope", 5, mysqlfence.Values{"body": "b"})
	if !errors.Is(err, sql.ErrNoRows) || errors.Is(err, fence.ErrStale) {
		t.Fatalf("Update of a missing row = %v, want sql.ErrNoRows", err)
	}
}

func testUpdate(t *testing.T) {
	ctx := context.Background()
	db := open(t)
	if err := docs.Upsert(ctx, db, "x", 34, mysqlfence.Values{"body": "b34"}); err != nil {
		t.Fatal(err)
	}
	if err := docs.Update(ctx, db, "x", 34, mysqlfence.Values{"body": "b34b"}); err != nil {
		t.Fatalf("Update with the equal fence: %v", err)
	}
	var se *fence.StaleError
	err := docs.Update(ctx, db, "x", 33, mysqlfence.Values{"body": "b33"})
	if !errors.As(err, &se) || se.Offered != 33 || se.Current != 34 || se.Key != "docs[x]" {
		t.Fatalf("Update with fence 33 after 34 = %v, want a StaleError 33 < 34 on docs[x]", err)
	}
	if f, err := docs.Current(ctx, db, "x"); err != nil || f != 34 {
		t.Fatalf("Current = %d, %v", f, err)
	}
	if _, body, _, _ := read(db, "x")(ctx); body != 34 {
		t.Fatalf("stored fence %d, want 34", body)
	}
}

func testInvalid(t *testing.T) {
	ctx := context.Background()
	db := open(t)
	for name, err := range map[string]error{
		"zero fence":       docs.Upsert(ctx, db, "x", 0, nil),
		"huge fence":       docs.Update(ctx, db, "x", fence.MaxSQL+1, nil),
		"set key":          docs.Upsert(ctx, db, "x", 1, mysqlfence.Values{"id": "y"}),
		"set fence":        docs.Upsert(ctx, db, "x", 1, mysqlfence.Values{"fence": 3}),
		"empty table":      mysqlfence.Table{Key: "id"}.Upsert(ctx, db, "x", 1, nil),
		"empty column":     docs.Upsert(ctx, db, "x", 1, mysqlfence.Values{"": 1}),
		"two dots":         mysqlfence.Table{Name: "a.b.c", Key: "id"}.Upsert(ctx, db, "x", 1, nil),
		"empty part":       mysqlfence.Table{Name: "a.", Key: "id"}.Upsert(ctx, db, "x", 1, nil),
		"NUL":              mysqlfence.Table{Name: "a\x00b", Key: "id"}.Upsert(ctx, db, "x", 1, nil),
		"trailing space":   mysqlfence.Table{Name: "docs ", Key: "id"}.Upsert(ctx, db, "x", 1, nil),
		"65 characters":    mysqlfence.Table{Name: strings.Repeat("é", 65), Key: "id"}.Upsert(ctx, db, "x", 1, nil),
		"outside the BMP":  mysqlfence.Table{Name: "docs😀", Key: "id"}.Upsert(ctx, db, "x", 1, nil),
		"bad UTF-8":        mysqlfence.Table{Name: "docs\xff", Key: "id"}.Upsert(ctx, db, "x", 1, nil),
		"trigger table":    mysqlfence.InstallTrigger(ctx, db, "", ""),
		"trigger column":   mysqlfence.InstallTrigger(ctx, db, "docs", "a.b"),
		"remove bad table": mysqlfence.RemoveTrigger(ctx, db, "a.b.c"),
	} {
		if !errors.Is(err, dlock.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
	if err := mysqlfence.InstallTrigger(ctx, db, "docs\xff", ""); err == nil || !strings.Contains(err.Error(), `"docs\xff"`) {
		t.Errorf("the error does not name the bad value: %v", err)
	}
}

// TestMariaDB runs every test as a subtest, so that they share one MariaDB
// server (testserver.MariaDB keeps it while a user is running).
func TestMariaDB(t *testing.T) {
	testserver.MariaDB(t)
	t.Run("UpsertRule", upsertRule())
	t.Run("UpsertRuleClientFoundRows", upsertRule("clientFoundRows=true"))
	t.Run("UpdateInTxRule", testUpdateInTxRule)
	t.Run("TriggerRule", testTriggerRule)
	t.Run("SameValues", testSameValues)
	t.Run("Update", testUpdate)
	t.Run("UpdateMissingRow", testUpdateMissingRow)
	t.Run("Invalid", testInvalid)
	t.Run("Contention", testContention)
	t.Run("RepeatableReadSnapshot", testRepeatableReadSnapshot)
	t.Run("TriggerRejectsRawUpdate", testTriggerRejectsRawUpdate)
	t.Run("InsideTransaction", testInsideTransaction)
	t.Run("QuotedNames", testQuotedNames)
}

// testRepeatableReadSnapshot: a transaction read the row (its snapshot
// holds fence 33), then a newer grant committed 34; the transaction's
// Update with 33 must be rejected with current fence 34, not see its own
// snapshot's 33.
func testRepeatableReadSnapshot(t *testing.T) {
	ctx := context.Background()
	db := open(t)
	if err := docs.Upsert(ctx, db, "x", 33, mysqlfence.Values{"body": "b33"}); err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var seen uint64
	if err := tx.QueryRowContext(ctx, `SELECT fence FROM docs WHERE id = 'x'`).Scan(&seen); err != nil || seen != 33 {
		t.Fatalf("snapshot read: %d, %v", seen, err)
	}
	if err := docs.Upsert(ctx, db, "x", 34, mysqlfence.Values{"body": "b34"}); err != nil {
		t.Fatal(err)
	}
	var se *fence.StaleError
	for name, err := range map[string]error{
		"Update": docs.Update(ctx, tx, "x", 33, mysqlfence.Values{"body": "stale"}),
		"Upsert": docs.Upsert(ctx, tx, "x", 33, mysqlfence.Values{"body": "stale"}),
	} {
		if !errors.As(err, &se) || se.Current != 34 {
			t.Fatalf("%s with 33 in a transaction whose snapshot predates fence 34: %v, want a StaleError naming 34", name, err)
		}
	}
}

func testTriggerRejectsRawUpdate(t *testing.T) {
	db := open(t)
	ctx := context.Background()
	for range 2 { // idempotent
		if err := mysqlfence.InstallTrigger(ctx, db, "docs", "fence"); err != nil {
			t.Fatal(err)
		}
	}
	if err := docs.Upsert(ctx, db, "x", 34, mysqlfence.Values{"body": "b34"}); err != nil {
		t.Fatal(err)
	}
	_, err := db.ExecContext(ctx, `UPDATE docs SET body = 'raw', fence = 33`) // no WHERE at all
	mapped := mysqlfence.MapError(err)
	var se *fence.StaleError
	var me *mysql.MySQLError
	if !errors.As(mapped, &se) || se.Offered != 33 || se.Current != 34 || se.Key != "docs" ||
		!errors.As(mapped, &me) || string(me.SQLState[:]) != mysqlfence.SQLState {
		t.Fatalf("raw UPDATE with fence 33 after 34: %v (mapped %v)", err, mapped)
	}
	exec(t, db, `ALTER TABLE docs MODIFY fence BIGINT NULL`)
	if _, err := db.ExecContext(ctx, `UPDATE docs SET fence = NULL`); !errors.Is(mysqlfence.MapError(err), fence.ErrStale) {
		t.Fatalf("UPDATE setting the fence to NULL: %v, want ErrStale", err)
	}
	if err := docs.Update(ctx, db, "x", 33, mysqlfence.Values{"body": "b33"}); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("Update with 33: %v", err)
	}
	exec(t, db, `UPDATE docs SET body = 'ok', fence = 34`)
	if err := mysqlfence.RemoveTrigger(ctx, db, "docs"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `UPDATE docs SET fence = 1`); err != nil {
		t.Fatalf("after RemoveTrigger: %v", err)
	}
}

// A rejection, by the WHERE clause or by the trigger, leaves the caller's
// transaction usable: MySQL rolls back only the failing statement.
func testInsideTransaction(t *testing.T) {
	db := open(t)
	ctx := context.Background()
	if err := mysqlfence.InstallTrigger(ctx, db, "docs", ""); err != nil {
		t.Fatal(err)
	}
	if err := docs.Upsert(ctx, db, "x", 34, mysqlfence.Values{"body": "b34"}); err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if err := docs.Update(ctx, tx, "x", 33, mysqlfence.Values{"body": "stale"}); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("Update in tx: %v", err)
	}
	_, err = tx.ExecContext(ctx, `UPDATE docs SET body = 'raw', fence = 33 WHERE id = 'x'`)
	if !errors.Is(mysqlfence.MapError(err), fence.ErrStale) {
		t.Fatalf("raw UPDATE in tx: %v", err)
	}
	if err := docs.Upsert(ctx, tx, "y", 33, mysqlfence.Values{"body": "other"}); err != nil {
		t.Fatalf("the transaction should still be usable: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if f, err := docs.Current(ctx, db, "y"); err != nil || f != 33 {
		t.Fatalf("Current(y) = %d, %v", f, err)
	}
	if body, f, _, err := read(db, "x")(ctx); err != nil || f != 34 || body != "b34" {
		t.Fatalf("x = %q, %d, %v; want b34 at 34", body, f, err)
	}
}

func testQuotedNames(t *testing.T) {
	db := open(t)
	ctx := context.Background()
	var schema string
	if err := db.QueryRow(`SELECT DATABASE()`).Scan(&schema); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("t", 60)
	for _, name := range []string{"Odd `T` \\' x", schema + ".q\\'", long} {
		exec(t, db, "CREATE TABLE "+quote(name)+" (`K` INT PRIMARY KEY, `F``` BIGINT UNSIGNED NOT NULL, `v a l` TEXT)")
		odd := mysqlfence.Table{Name: name, Key: "K", Fence: "F`"}
		if err := mysqlfence.InstallTrigger(ctx, db, odd.Name, odd.Fence); err != nil {
			t.Fatal(err)
		}
		if err := odd.Upsert(ctx, db, 1, 9, mysqlfence.Values{"v a l": "x"}); err != nil {
			t.Fatal(err)
		}
		err := odd.Upsert(ctx, db, 1, 8, mysqlfence.Values{"v a l": "y"})
		if !errors.Is(err, fence.ErrStale) || !strings.Contains(err.Error(), "9") {
			t.Fatalf("%s: Upsert with 8 after 9: %v", name, err)
		}
		_, err = db.ExecContext(ctx, "UPDATE "+quote(name)+" SET `F``` = 2")
		var se *fence.StaleError
		if !errors.As(mysqlfence.MapError(err), &se) || se.Offered != 2 || se.Current != 9 {
			t.Fatalf("%s: raw UPDATE: %v", name, err)
		}
		if err := mysqlfence.RemoveTrigger(ctx, db, odd.Name); err != nil {
			t.Fatal(err)
		}
		if _, err = db.ExecContext(ctx, "UPDATE "+quote(name)+" SET `F``` = 2"); err != nil {
			t.Fatalf("%s: after RemoveTrigger: %v", name, err)
		}
	}
}

// quote quotes a possibly schema-qualified name for the test's own SQL.
func quote(name string) string {
	parts := strings.Split(name, ".")
	for i, p := range parts {
		parts[i] = "`" + strings.ReplaceAll(p, "`", "``") + "`"
	}
	return strings.Join(parts, ".")
}
