package pgfence

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/dlockdev/dlock/fence"
	"github.com/dlockdev/dlock/fence/internal/fencesql"
	"github.com/jackc/pgx/v5"
)

// DefaultFenceColumn is the fence column when Table.Fence is empty.
const DefaultFenceColumn = "fence"

// Table describes a fenced table: one row per resource key, with a BIGINT
// fence column beside the data.
type Table struct {
	// Name is the table, optionally schema-qualified ("billing.accounts").
	Name string
	// Key is the primary-key (or unique) column identifying a resource.
	Key string
	// Fence is the BIGINT column holding the highest accepted fence
	// (default DefaultFenceColumn).
	Fence string
}

// Values are the columns a fenced write sets, by column name.
type Values map[string]any

// prepare validates and quotes the pieces of one write.
func (t Table) prepare(key any, f uint64, set Values) (stmt, error) {
	return fencesql.Prepare(ident, t.Name, t.Key, cmp.Or(t.Fence, DefaultFenceColumn), key, f, set)
}

type stmt = fencesql.Stmt

// Update sets the columns in set on the row whose key column equals key,
// and its fence column to f, if the row's fence is not higher than f; one
// statement. A higher fence yields a *fence.StaleError (errors.Is
// fence.ErrStale); a missing row yields an error matching pgx.ErrNoRows.
func (t Table) Update(ctx context.Context, q Querier, key any, f uint64, set Values) error {
	s, err := t.prepare(key, f, set)
	if err != nil {
		return err
	}
	sql := s.UpdateSQL("$")
	tag, err := q.Exec(ctx, sql, s.Args...)
	if err != nil {
		return MapError(err)
	}
	if tag.RowsAffected() > 0 {
		return nil
	}
	return t.rejected(ctx, q, s, key, f)
}

// Upsert inserts the row (key, fence f, set) or, when the key exists,
// updates it if its fence is not higher than f; one INSERT ... ON CONFLICT
// statement. The key column needs a unique index. A higher fence yields a
// *fence.StaleError.
func (t Table) Upsert(ctx context.Context, q Querier, key any, f uint64, set Values) error {
	s, err := t.prepare(key, f, set)
	if err != nil {
		return err
	}
	sql := s.UpsertSQL("$")
	tag, err := q.Exec(ctx, sql, s.Args...)
	if err != nil {
		return MapError(err)
	}
	if tag.RowsAffected() > 0 {
		return nil
	}
	return t.rejected(ctx, q, s, key, f)
}

// rejected builds the error for a write that matched no row: it reads the
// current fence (a fresh snapshot under READ COMMITTED) to say why.
func (t Table) rejected(ctx context.Context, q Querier, s stmt, key any, f uint64) error {
	var cur int64
	sql := fmt.Sprintf("SELECT %s FROM %s WHERE %s = $1", s.Fence, s.Table, s.Key)
	err := q.QueryRow(ctx, sql, key).Scan(&cur)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("pgfence: %s: no row with %s = %v: %w", t.Name, t.Key, key, pgx.ErrNoRows)
	}
	if err != nil {
		return fmt.Errorf("pgfence: %s: write with fence %d matched no row, and reading the current fence failed: %w", t.Name, f, err)
	}
	return &fence.StaleError{Key: fmt.Sprintf("%s[%v]", t.Name, key), Offered: f, Current: uint64(cur)}
}

// Current returns the fence stored on key's row.
func (t Table) Current(ctx context.Context, q Querier, key any) (uint64, error) {
	s, err := t.prepare(key, 1, nil)
	if err != nil {
		return 0, err
	}
	var cur int64
	err = q.QueryRow(ctx, fmt.Sprintf("SELECT %s FROM %s WHERE %s = $1", s.Fence, s.Table, s.Key), key).Scan(&cur)
	return uint64(cur), err
}
