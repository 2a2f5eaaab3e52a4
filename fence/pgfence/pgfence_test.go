package pgfence_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/dlocktest"
	"github.com/dlockdev/dlock/fence"
	"github.com/dlockdev/dlock/fence/internal/fencetest"
	"github.com/dlockdev/dlock/fence/pgfence"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

func TestMain(m *testing.M) { dlocktest.Main(testserver.KeepShared(m)) }

var docs = pgfence.Table{Name: "docs", Key: "id"}

func pool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	ctx := context.Background()
	p, err := pgxpool.New(ctx, testserver.Postgres(t).NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	if _, err := p.Exec(ctx, `CREATE TABLE docs (id text PRIMARY KEY, fence bigint NOT NULL, body text)`); err != nil {
		t.Fatal(err)
	}
	return p
}

func read(p *pgxpool.Pool, id string) func(context.Context) (string, uint64, bool, error) {
	return func(ctx context.Context) (string, uint64, bool, error) {
		var v string
		var f int64
		err := p.QueryRow(ctx, `SELECT body, fence FROM docs WHERE id = $1`, id).Scan(&v, &f)
		if errors.Is(err, pgx.ErrNoRows) {
			return "", 0, false, nil
		}
		return v, uint64(f), err == nil, err
	}
}

func testUpsertRule(t *testing.T) {
	p := pool(t)
	n := 0
	fencetest.Run(t, func(t *testing.T) fencetest.Store {
		n++
		id := fmt.Sprint(n)
		return fencetest.Store{
			Write: func(ctx context.Context, f uint64, v string) error {
				return docs.Upsert(ctx, p, id, f, pgfence.Values{"body": v})
			},
			Read: read(p, id),
		}
	})
}

// testUpdateInTxRule runs every write as Update inside its own
// transaction, as a caller would.
func testUpdateInTxRule(t *testing.T) {
	p := pool(t)
	n := 0
	fencetest.Run(t, func(t *testing.T) fencetest.Store {
		n++
		id := fmt.Sprint(n)
		if _, err := p.Exec(context.Background(), `INSERT INTO docs VALUES ($1, 1, '1/0/0')`, id); err != nil {
			t.Fatal(err)
		}
		return fencetest.Store{
			Write: func(ctx context.Context, f uint64, v string) error {
				return pgx.BeginFunc(ctx, p, func(tx pgx.Tx) error {
					return docs.Update(ctx, tx, id, f, pgfence.Values{"body": v})
				})
			},
			Read: read(p, id),
		}
	})
}

// testTriggerRule fences writers that use plain UPDATEs without the fenced
// WHERE clause: only the trigger stands between them and the row.
func testTriggerRule(t *testing.T) {
	p := pool(t)
	ctx := context.Background()
	if err := pgfence.InstallTrigger(ctx, p, "docs", ""); err != nil {
		t.Fatal(err)
	}
	n := 0
	fencetest.Run(t, func(t *testing.T) fencetest.Store {
		n++
		id := fmt.Sprint(n)
		if _, err := p.Exec(ctx, `INSERT INTO docs VALUES ($1, 1, '1/0/0')`, id); err != nil {
			t.Fatal(err)
		}
		return fencetest.Store{
			Write: func(ctx context.Context, f uint64, v string) error {
				_, err := p.Exec(ctx, `UPDATE docs SET body = $2, fence = $3 WHERE id = $1`, id, v, int64(f))
				return pgfence.MapError(err)
			},
			Read: read(p, id),
		}
	})
}

func testTriggerRejectsRawUpdate(t *testing.T) {
	p := pool(t)
	ctx := context.Background()
	for range 2 { // idempotent
		if err := pgfence.InstallTrigger(ctx, p, "docs", "fence"); err != nil {
			t.Fatal(err)
		}
	}
	if err := docs.Upsert(ctx, p, "x", 34, pgfence.Values{"body": "b34"}); err != nil {
		t.Fatal(err)
	}
	_, err := p.Exec(ctx, `UPDATE docs SET body = 'raw', fence = 33`) // no WHERE at all
	mapped := pgfence.MapError(err)
	var se *fence.StaleError
	var pe *pgconn.PgError
	if !errors.As(mapped, &se) || se.Offered != 33 || se.Current != 34 || !errors.As(mapped, &pe) || pe.Code != pgfence.SQLState {
		t.Fatalf("raw UPDATE with fence 33 after 34: %v (mapped %v)", err, mapped)
	}
	if _, err := p.Exec(ctx, `UPDATE docs SET fence = NULL`); !errors.Is(pgfence.MapError(err), fence.ErrStale) {
		t.Fatalf("UPDATE setting the fence to NULL: %v, want ErrStale", err)
	}
	// The same through Update, whose WHERE clause would have caught it too.
	if err := docs.Update(ctx, p, "x", 33, pgfence.Values{"body": "b33"}); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("Update with 33: %v", err)
	}
	if _, err := p.Exec(ctx, `UPDATE docs SET body = 'ok', fence = 34`); err != nil {
		t.Fatalf("raw UPDATE with the equal fence: %v", err)
	}
	if err := pgfence.RemoveTrigger(ctx, p, "docs"); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Exec(ctx, `UPDATE docs SET fence = 1`); err != nil {
		t.Fatalf("after RemoveTrigger: %v", err)
	}
}

// A trigger rejection aborts the caller's transaction; an Update rejection
// does not, so the caller chooses.
func testInsideTransaction(t *testing.T) {
	p := pool(t)
	ctx := context.Background()
	if err := docs.Upsert(ctx, p, "x", 34, pgfence.Values{"body": "b34"}); err != nil {
		t.Fatal(err)
	}
	tx, err := p.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if err := docs.Update(ctx, tx, "x", 33, pgfence.Values{"body": "stale"}); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("Update in tx: %v", err)
	}
	if err := docs.Upsert(ctx, tx, "y", 33, pgfence.Values{"body": "other"}); err != nil {
		t.Fatalf("the transaction should still be usable: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if f, err := docs.Current(ctx, p, "y"); err != nil || f != 33 {
		t.Fatalf("Current(y) = %d, %v", f, err)
	}
}

func testUpdateMissingRow(t *testing.T) {
	p := pool(t)
	err := docs.Update(context.Background(), p, "nope", 5, pgfence.Values{"body": "b"})
	if !errors.Is(err, pgx.ErrNoRows) || errors.Is(err, fence.ErrStale) {
		t.Fatalf("Update of a missing row = %v, want pgx.ErrNoRows", err)
	}
}

func testInvalid(t *testing.T) {
	ctx := context.Background()
	p := pool(t)
	for name, err := range map[string]error{
		"zero fence":   docs.Upsert(ctx, p, "x", 0, nil),
		"huge fence":   docs.Update(ctx, p, "x", fence.MaxSQL+1, nil),
		"set key":      docs.Upsert(ctx, p, "x", 1, pgfence.Values{"id": "y"}),
		"empty table":  pgfence.Table{Key: "id"}.Upsert(ctx, p, "x", 1, nil),
		"bad ident":    pgfence.Table{Name: "a..b", Key: "id"}.Upsert(ctx, p, "x", 1, nil),
		"trigger name": pgfence.InstallTrigger(ctx, p, "", ""),
	} {
		if !errors.Is(err, dlock.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
}

func testQuotedNames(t *testing.T) {
	p := pool(t)
	ctx := context.Background()
	if _, err := p.Exec(ctx, `CREATE SCHEMA "my schema"; CREATE TABLE "my schema"."Odd ""T""" ("K" int PRIMARY KEY, "F" bigint NOT NULL, "v a l" text)`); err != nil {
		t.Fatal(err)
	}
	odd := pgfence.Table{Name: `my schema.Odd "T"`, Key: "K", Fence: "F"}
	if err := pgfence.InstallTrigger(ctx, p, odd.Name, odd.Fence); err != nil {
		t.Fatal(err)
	}
	if err := odd.Upsert(ctx, p, 1, 9, pgfence.Values{"v a l": "x"}); err != nil {
		t.Fatal(err)
	}
	err := odd.Upsert(ctx, p, 1, 8, pgfence.Values{"v a l": "y"})
	if !errors.Is(err, fence.ErrStale) || !strings.Contains(err.Error(), "9") {
		t.Fatalf("Upsert with 8 after 9: %v", err)
	}
	_, err = p.Exec(ctx, `UPDATE "my schema"."Odd ""T""" SET "F" = 2`)
	if !errors.Is(pgfence.MapError(err), fence.ErrStale) {
		t.Fatalf("raw UPDATE: %v", err)
	}
}

// TestPostgres runs every test as a subtest, so that they share one PostgreSQL
// server (testserver.Postgres keeps it while a user is running).
func TestPostgres(t *testing.T) {
	testserver.Postgres(t)
	t.Run("UpsertRule", testUpsertRule)
	t.Run("UpdateInTxRule", testUpdateInTxRule)
	t.Run("TriggerRule", testTriggerRule)
	t.Run("TriggerRejectsRawUpdate", testTriggerRejectsRawUpdate)
	t.Run("InsideTransaction", testInsideTransaction)
	t.Run("UpdateMissingRow", testUpdateMissingRow)
	t.Run("Invalid", testInvalid)
	t.Run("QuotedNames", testQuotedNames)
}
