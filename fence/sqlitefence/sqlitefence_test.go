package sqlitefence_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/dlocktest"
	"github.com/dlockdev/dlock/fence"
	"github.com/dlockdev/dlock/fence/internal/fencetest"
	"github.com/dlockdev/dlock/fence/sqlitefence"
	_ "modernc.org/sqlite"
)

func TestMain(m *testing.M) { dlocktest.Main(m) }

var docs = sqlitefence.Table{Name: "docs", Key: "id"}

func open(t *testing.T) *sql.DB {
	t.Helper()
	dsn := "file:" + filepath.Join(t.TempDir(), "f.db") + "?_pragma=busy_timeout(20000)&_pragma=journal_mode(wal)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec(`CREATE TABLE docs (id TEXT PRIMARY KEY, fence INTEGER NOT NULL, body TEXT)`); err != nil {
		t.Fatal(err)
	}
	return db
}

func TestRule(t *testing.T) {
	fencetest.Run(t, func(t *testing.T) fencetest.Store {
		db := open(t)
		return fencetest.Store{
			Write: func(ctx context.Context, f uint64, v string) error {
				return docs.Upsert(ctx, db, "a", f, sqlitefence.Values{"body": v})
			},
			Read: func(ctx context.Context) (string, uint64, bool, error) {
				var v string
				var f uint64
				err := db.QueryRowContext(ctx, `SELECT body, fence FROM docs WHERE id = 'a'`).Scan(&v, &f)
				if errors.Is(err, sql.ErrNoRows) {
					return "", 0, false, nil
				}
				return v, f, err == nil, err
			},
		}
	})
}

func TestUpdate(t *testing.T) {
	ctx := context.Background()
	db := open(t)
	if err := docs.Update(ctx, db, "x", 1, sqlitefence.Values{"body": "b"}); !errors.Is(err, sql.ErrNoRows) {
		t.Fatalf("Update of a missing row = %v, want sql.ErrNoRows", err)
	}
	if err := docs.Upsert(ctx, db, "x", 34, sqlitefence.Values{"body": "b34"}); err != nil {
		t.Fatal(err)
	}
	if err := docs.Update(ctx, db, "x", 34, sqlitefence.Values{"body": "b34b"}); err != nil {
		t.Fatalf("Update with the equal fence: %v", err)
	}
	var se *fence.StaleError
	if err := docs.Update(ctx, db, "x", 33, sqlitefence.Values{"body": "b33"}); !errors.As(err, &se) || se.Current != 34 {
		t.Fatalf("Update with fence 33 after 34 = %v", err)
	}
	if f, err := docs.Current(ctx, db, "x"); err != nil || f != 34 {
		t.Fatalf("Current = %d, %v", f, err)
	}
}

func TestTrigger(t *testing.T) {
	ctx := context.Background()
	db := open(t)
	for range 2 { // idempotent
		if err := sqlitefence.InstallTrigger(ctx, db, "docs", ""); err != nil {
			t.Fatal(err)
		}
	}
	if err := docs.Upsert(ctx, db, "x", 34, sqlitefence.Values{"body": "b34"}); err != nil {
		t.Fatal(err)
	}
	_, err := db.ExecContext(ctx, `UPDATE docs SET body = 'raw', fence = 33 WHERE id = 'x'`)
	var se *fence.StaleError
	if err = sqlitefence.MapError(err); !errors.As(err, &se) || se.Offered != 33 || se.Current != 34 || se.Key != "docs" {
		t.Fatalf("raw UPDATE with a lower fence = %v, want a StaleError 33 < 34 on docs", err)
	}
	if _, err := db.ExecContext(ctx, `UPDATE docs SET body = 'raw', fence = 35 WHERE id = 'x'`); err != nil {
		t.Fatalf("raw UPDATE with a higher fence: %v", err)
	}
	var body string
	if err := db.QueryRow(`SELECT body FROM docs WHERE id = 'x'`).Scan(&body); err != nil || body != "raw" {
		t.Fatalf("body %q, %v", body, err)
	}
}

func TestInvalid(t *testing.T) {
	ctx := context.Background()
	db := open(t)
	for name, err := range map[string]error{
		"zero fence":   docs.Upsert(ctx, db, "x", 0, nil),
		"huge fence":   docs.Upsert(ctx, db, "x", fence.MaxSQL+1, nil),
		"set fence":    docs.Upsert(ctx, db, "x", 1, sqlitefence.Values{"fence": 3}),
		"empty table":  sqlitefence.Table{Key: "id"}.Upsert(ctx, db, "x", 1, nil),
		"empty column": docs.Upsert(ctx, db, "x", 1, sqlitefence.Values{"": 1}),
	} {
		if !errors.Is(err, dlock.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
}

// TestTriggerRule fences plain UPDATEs without the fenced WHERE clause.
func TestTriggerRule(t *testing.T) {
	fencetest.Run(t, func(t *testing.T) fencetest.Store {
		db := open(t)
		ctx := context.Background()
		if err := sqlitefence.InstallTrigger(ctx, db, "docs", "fence"); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(`INSERT INTO docs VALUES ('a', 1, '1/0/0')`); err != nil {
			t.Fatal(err)
		}
		return fencetest.Store{
			Write: func(ctx context.Context, f uint64, v string) error {
				_, err := db.ExecContext(ctx, `UPDATE docs SET body = ?, fence = ? WHERE id = 'a'`, v, int64(f))
				return sqlitefence.MapError(err)
			},
			Read: func(ctx context.Context) (string, uint64, bool, error) {
				var v string
				var f uint64
				err := db.QueryRowContext(ctx, `SELECT body, fence FROM docs WHERE id = 'a'`).Scan(&v, &f)
				return v, f, err == nil, err
			},
		}
	})
}
