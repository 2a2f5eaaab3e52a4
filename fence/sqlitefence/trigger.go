package sqlitefence

import (
	"cmp"
	"context"
	"fmt"
	"strings"

	"github.com/dlockdev/dlock/fence"
	"github.com/dlockdev/dlock/fence/internal/fencesql"
)

// TriggerMessage starts the message of the trigger's RAISE(ABORT, ...),
// which goes on with "offered=N current=M table=T".
const TriggerMessage = "dlock: stale fence"

// InstallTrigger makes SQLite abort every UPDATE of table that would lower
// fenceColumn (default DefaultFenceColumn), even one without a fenced
// WHERE clause. It is idempotent. The trigger is named
// dlock_fence_guard_<table>. Pass errors through MapError. It needs an
// SQLite whose RAISE takes an expression (3.47 or later; modernc.org/sqlite
// embeds a recent one).
func InstallTrigger(ctx context.Context, db DB, table, fenceColumn string) error {
	tbl, err := ident(table)
	if err != nil {
		return err
	}
	col, err := ident(cmp.Or(fenceColumn, DefaultFenceColumn))
	if err != nil {
		return err
	}
	name, _ := ident("dlock_fence_guard_" + table)
	q := fmt.Sprintf(`CREATE TRIGGER IF NOT EXISTS %[1]s BEFORE UPDATE ON %[2]s FOR EACH ROW
		WHEN OLD.%[3]s IS NOT NULL AND (NEW.%[3]s IS NULL OR NEW.%[3]s < OLD.%[3]s)
		BEGIN SELECT RAISE(ABORT, '%[4]s offered=' || coalesce(NEW.%[3]s, 0) || ' current=' || OLD.%[3]s || ' table=' || %[5]s); END`,
		name, tbl, col, TriggerMessage, fencesql.QuoteLiteral(table))
	if _, err := db.ExecContext(ctx, q); err != nil {
		return fmt.Errorf("sqlitefence: create trigger on %s: %w", table, err)
	}
	return nil
}

// MapError turns the trigger's abort into a *fence.StaleError that also
// unwraps to the driver's error; any other error is returned as is.
func MapError(err error) error {
	if err == nil {
		return nil
	}
	_, detail, ok := strings.Cut(err.Error(), TriggerMessage)
	if !ok {
		return err
	}
	return fence.Rejected("sqlite", fencesql.TriggerError(detail, err))
}
