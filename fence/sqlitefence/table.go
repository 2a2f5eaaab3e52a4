package sqlitefence

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/fence"
	"github.com/dlockdev/dlock/fence/internal/fencesql"
)

// DB is the part of database/sql this package uses; *sql.DB, *sql.Tx and
// *sql.Conn satisfy it.
type DB interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// DefaultFenceColumn is the fence column when Table.Fence is empty.
const DefaultFenceColumn = "fence"

// Table describes a fenced table: one row per resource key, with an
// INTEGER fence column beside the data.
type Table struct {
	// Name is the table.
	Name string
	// Key is the PRIMARY KEY (or UNIQUE) column identifying a resource.
	Key string
	// Fence is the INTEGER column holding the highest accepted fence
	// (default DefaultFenceColumn).
	Fence string
}

// Values are the columns a fenced write sets, by column name.
type Values map[string]any

func ident(name string) (string, error) {
	if name == "" || strings.ContainsRune(name, 0) {
		return "", fmt.Errorf("%w: SQL identifier %q", dlock.ErrInvalidArgument, name)
	}
	return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`, nil
}

// prepare validates and quotes the pieces of one write.
func (t Table) prepare(key any, f uint64, set Values) (stmt, error) {
	return fencesql.Prepare(ident, t.Name, t.Key, cmp.Or(t.Fence, DefaultFenceColumn), key, f, set)
}

type stmt = fencesql.Stmt

// Update sets the columns in set, and the fence column to f, on key's row
// if its fence is not higher than f; one statement. A higher fence yields
// a *fence.StaleError; a missing row an error matching sql.ErrNoRows.
func (t Table) Update(ctx context.Context, db DB, key any, f uint64, set Values) error {
	return t.write(ctx, db, key, f, set, stmt.UpdateSQL)
}

// Upsert inserts the row or, when key exists, updates it if its fence is
// not higher than f; one INSERT ... ON CONFLICT statement.
func (t Table) Upsert(ctx context.Context, db DB, key any, f uint64, set Values) error {
	return t.write(ctx, db, key, f, set, stmt.UpsertSQL)
}

// write runs one fenced statement built by build; a write that matched no
// row reads the current fence to say why.
func (t Table) write(ctx context.Context, db DB, key any, f uint64, set Values, build func(stmt, string) string) error {
	s, err := t.prepare(key, f, set)
	if err != nil {
		return err
	}
	res, err := db.ExecContext(ctx, build(s, "?"), s.Args...)
	if err != nil {
		return MapError(err)
	}
	if n, err := res.RowsAffected(); err == nil && n > 0 {
		return nil
	}
	var cur int64
	err = db.QueryRowContext(ctx, s.CurrentSQL("?1"), key).Scan(&cur)
	return fence.Rejected("sqlite", fencesql.Rejected("sqlitefence", t.Name, t.Key, key, f, cur, err, sql.ErrNoRows))
}

// Current returns the fence stored on key's row.
func (t Table) Current(ctx context.Context, db DB, key any) (uint64, error) {
	s, err := t.prepare(key, 1, nil)
	if err != nil {
		return 0, err
	}
	var cur int64
	err = db.QueryRowContext(ctx, s.CurrentSQL("?1"), key).Scan(&cur)
	return uint64(cur), err
}
