package sqlitefence

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
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
	s, err := t.prepare(key, f, set)
	if err != nil {
		return err
	}
	q := s.UpdateSQL("?")
	return t.finish(ctx, db, s, key, f, q)
}

// Upsert inserts the row or, when key exists, updates it if its fence is
// not higher than f; one INSERT ... ON CONFLICT statement.
func (t Table) Upsert(ctx context.Context, db DB, key any, f uint64, set Values) error {
	s, err := t.prepare(key, f, set)
	if err != nil {
		return err
	}
	q := s.UpsertSQL("?")
	return t.finish(ctx, db, s, key, f, q)
}

func (t Table) finish(ctx context.Context, db DB, s stmt, key any, f uint64, q string) error {
	res, err := db.ExecContext(ctx, q, s.Args...)
	if err != nil {
		return MapError(err)
	}
	if n, err := res.RowsAffected(); err == nil && n > 0 {
		return nil
	}
	var cur int64
	err = db.QueryRowContext(ctx, fmt.Sprintf("SELECT %s FROM %s WHERE %s = ?1", s.Fence, s.Table, s.Key), key).Scan(&cur)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("sqlitefence: %s: no row with %s = %v: %w", t.Name, t.Key, key, sql.ErrNoRows)
	}
	if err != nil {
		return fmt.Errorf("sqlitefence: %s: write with fence %d matched no row, and reading the current fence failed: %w", t.Name, f, err)
	}
	return &fence.StaleError{Key: fmt.Sprintf("%s[%v]", t.Name, key), Offered: f, Current: uint64(cur)}
}

// Current returns the fence stored on key's row.
func (t Table) Current(ctx context.Context, db DB, key any) (uint64, error) {
	s, err := t.prepare(key, 1, nil)
	if err != nil {
		return 0, err
	}
	var cur int64
	err = db.QueryRowContext(ctx, fmt.Sprintf("SELECT %s FROM %s WHERE %s = ?1", s.Fence, s.Table, s.Key), key).Scan(&cur)
	return uint64(cur), err
}
