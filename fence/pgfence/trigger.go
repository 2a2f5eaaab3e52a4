package pgfence

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/dlockdev/dlock/fence"
	"github.com/dlockdev/dlock/fence/internal/fencesql"
	"github.com/jackc/pgx/v5/pgconn"
)

// SQLState is the SQLSTATE the trigger raises when an UPDATE would lower a
// row's fence. It is in no class PostgreSQL uses.
const SQLState = "DLF01"

// guardFunction is shared by every fenced table: the fence column's name
// is the trigger's argument, read through to_jsonb so one function serves
// any table. The DETAIL carries machine-readable values for MapError.
const guardFunction = `CREATE OR REPLACE FUNCTION dlock_fence_guard() RETURNS trigger
LANGUAGE plpgsql AS $fn$
DECLARE
	col text := TG_ARGV[0];
	old_f numeric := (to_jsonb(OLD) ->> col)::numeric;
	new_f numeric := (to_jsonb(NEW) ->> col)::numeric;
BEGIN
	IF old_f IS NOT NULL AND (new_f IS NULL OR new_f < old_f) THEN
		RAISE EXCEPTION USING
			ERRCODE = 'DLF01',
			MESSAGE = format('stale fence %s for %s.%s (current %s)', coalesce(new_f::text, 'NULL'), TG_TABLE_SCHEMA, TG_TABLE_NAME, old_f),
			DETAIL = format('offered=%s current=%s table=%s', coalesce(new_f::text, '0'), old_f, TG_TABLE_NAME),
			HINT = 'the lock grant behind this write was superseded; stop writing';
	END IF;
	RETURN NEW;
END
$fn$`

// InstallTrigger makes PostgreSQL itself reject every UPDATE of table that
// would lower fenceColumn (default DefaultFenceColumn), including UPDATEs
// without a fenced WHERE clause. It is idempotent and runs in q (run it in
// a migration transaction if you like). It creates one shared function,
// dlock_fence_guard(), and a trigger named dlock_fence_guard on the table.
// Rejections raise SQLSTATE SQLState; pass errors through MapError. It
// needs PostgreSQL 14 or later (CREATE OR REPLACE TRIGGER); run it from a
// migration rather than from many processes at once.
func InstallTrigger(ctx context.Context, q Querier, table, fenceColumn string) error {
	tbl, err := ident(table)
	if err != nil {
		return err
	}
	col := cmp.Or(fenceColumn, DefaultFenceColumn)
	if _, err := ident(col); err != nil {
		return err
	}
	if _, err := q.Exec(ctx, guardFunction); err != nil {
		return fmt.Errorf("pgfence: create guard function: %w", err)
	}
	sql := fmt.Sprintf(`CREATE OR REPLACE TRIGGER dlock_fence_guard BEFORE UPDATE ON %s
		FOR EACH ROW EXECUTE FUNCTION dlock_fence_guard(%s)`, tbl, fencesql.QuoteLiteral(col))
	if _, err := q.Exec(ctx, sql); err != nil {
		return fmt.Errorf("pgfence: create trigger on %s: %w", table, err)
	}
	return nil
}

// RemoveTrigger drops the trigger from table (the shared function stays).
func RemoveTrigger(ctx context.Context, q Querier, table string) error {
	tbl, err := ident(table)
	if err != nil {
		return err
	}
	_, err = q.Exec(ctx, "DROP TRIGGER IF EXISTS dlock_fence_guard ON "+tbl)
	return err
}

// MapError turns the trigger's exception into a *fence.StaleError that
// also unwraps to the *pgconn.PgError; any other error is returned as is.
func MapError(err error) error {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != SQLState || errors.Is(err, fence.ErrStale) {
		return err
	}
	return fence.Rejected("postgres", fencesql.TriggerError(pe.Detail, err))
}
