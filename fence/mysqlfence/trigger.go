package mysqlfence

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/fence"
	"github.com/dlockdev/dlock/fence/internal/fencesql"
	"github.com/go-sql-driver/mysql"
)

// SQLState is the SQLSTATE the trigger signals when an UPDATE would lower
// a row's fence: the class MySQL reserves for user-defined exceptions
// (error number 1644). MapError also checks the message's TriggerMessage.
const SQLState = "45000"

// TriggerMessage starts the message the trigger signals, which goes on
// with "offered=N current=M table=T" (cut at MySQL's 128 characters).
const TriggerMessage = "dlock: stale fence"

// triggerPrefix names every trigger this package creates.
const triggerPrefix = "dlock_fence_guard_"

// triggerBody rejects an UPDATE that lowers (or clears) the fence column
// %[1]s of table %[2]s; %[3]s is the table's name as a hex literal, so no
// name can end the string early whatever the sql_mode. SIGNAL takes only a
// variable or literal, hence msg.
const triggerBody = `CREATE TRIGGER %[4]s BEFORE UPDATE ON %[2]s FOR EACH ROW
BEGIN
	DECLARE msg VARCHAR(128);
	IF OLD.%[1]s IS NOT NULL AND (NEW.%[1]s IS NULL OR NEW.%[1]s < OLD.%[1]s) THEN
		SET msg = LEFT(CONCAT('%[5]s offered=', COALESCE(NEW.%[1]s, 0), ' current=', OLD.%[1]s,
			' table=', CONVERT(X'%[3]s' USING utf8mb4)), 128);
		SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = msg;
	END IF;
END`

// InstallTrigger makes the server itself reject every UPDATE of table
// that would lower fenceColumn (default DefaultFenceColumn), including
// UPDATEs without a fenced WHERE clause. The trigger is named
// dlock_fence_guard_<table> (a hash of the name when that is longer than
// 64 characters), in the table's schema. It is idempotent: an existing
// trigger of that name is kept, so to change the fence column call
// RemoveTrigger first. Rejections signal SQLSTATE SQLState; pass errors
// through MapError. With binary logging on, creating a trigger needs the
// SUPER privilege or log_bin_trust_function_creators=1.
func InstallTrigger(ctx context.Context, db DB, table, fenceColumn string) error {
	tbl, err := ident(table)
	if err != nil {
		return err
	}
	col, err := ident(cmp.Or(fenceColumn, DefaultFenceColumn))
	if err != nil {
		return err
	}
	if strings.Contains(fenceColumn, ".") {
		return fmt.Errorf("%w: fence column %q: a column name has no dot", dlock.ErrInvalidArgument, fenceColumn)
	}
	_, name := splitSchema(table)
	q := fmt.Sprintf(triggerBody, col, tbl, hex.EncodeToString([]byte(name)), triggerName(table), TriggerMessage)
	_, err = db.ExecContext(ctx, q)
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == 1359 { // ER_TRG_ALREADY_EXISTS
		return nil
	}
	if err != nil {
		return fmt.Errorf("mysqlfence: create trigger on %s: %w", table, err)
	}
	return nil
}

// RemoveTrigger drops InstallTrigger's trigger from table, if it is there.
func RemoveTrigger(ctx context.Context, db DB, table string) error {
	if _, err := ident(table); err != nil {
		return err
	}
	_, err := db.ExecContext(ctx, "DROP TRIGGER IF EXISTS "+triggerName(table))
	return err
}

// triggerName is the quoted, schema-qualified name of table's trigger;
// table must have passed ident.
func triggerName(table string) string {
	schema, name := splitSchema(table)
	trg := triggerPrefix + name
	if len([]rune(trg)) > maxIdent {
		sum := sha256.Sum256([]byte(name))
		trg = triggerPrefix + hex.EncodeToString(sum[:12])
	}
	if schema != "" {
		trg = schema + "." + trg
	}
	q, _ := ident(trg)
	return q
}

// MapError turns the trigger's signal into a *fence.StaleError that also
// unwraps to the *mysql.MySQLError; any other error is returned as is.
func MapError(err error) error {
	var me *mysql.MySQLError
	if !errors.As(err, &me) || string(me.SQLState[:]) != SQLState || errors.Is(err, fence.ErrStale) {
		return err
	}
	detail, ok := strings.CutPrefix(me.Message, TriggerMessage)
	if !ok {
		return err
	}
	return fence.Rejected("mysql", fencesql.TriggerError(detail, err))
}
