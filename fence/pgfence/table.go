package pgfence

import (
	"cmp"
	"context"

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
	return t.write(ctx, q, key, f, set, stmt.UpdateSQL)
}

// Upsert inserts the row (key, fence f, set) or, when the key exists,
// updates it if its fence is not higher than f; one INSERT ... ON CONFLICT
// statement. The key column needs a unique index. A higher fence yields a
// *fence.StaleError.
func (t Table) Upsert(ctx context.Context, q Querier, key any, f uint64, set Values) error {
	return t.write(ctx, q, key, f, set, stmt.UpsertSQL)
}

// write runs one fenced statement built by build; a write that matched no
// row reads the current fence (a fresh snapshot under READ COMMITTED) to
// say why.
func (t Table) write(ctx context.Context, q Querier, key any, f uint64, set Values, build func(stmt, string) string) error {
	s, err := t.prepare(key, f, set)
	if err != nil {
		return err
	}
	tag, err := q.Exec(ctx, build(s, "$"), s.Args...)
	if err != nil {
		return MapError(err)
	}
	if tag.RowsAffected() > 0 {
		return nil
	}
	var cur int64
	err = q.QueryRow(ctx, s.CurrentSQL("$1"), key).Scan(&cur)
	return fence.Rejected("postgres", fencesql.Rejected("pgfence", t.Name, t.Key, key, f, cur, err, pgx.ErrNoRows))
}

// Current returns the fence stored on key's row.
func (t Table) Current(ctx context.Context, q Querier, key any) (uint64, error) {
	s, err := t.prepare(key, 1, nil)
	if err != nil {
		return 0, err
	}
	var cur int64
	err = q.QueryRow(ctx, s.CurrentSQL("$1"), key).Scan(&cur)
	return uint64(cur), err
}
