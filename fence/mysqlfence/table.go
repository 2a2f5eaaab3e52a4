package mysqlfence

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/dlockdev/dlock/fence"
	"github.com/dlockdev/dlock/fence/internal/fencesql"
	"github.com/go-sql-driver/mysql"
)

// DB is the part of database/sql this package uses; *sql.DB, *sql.Tx and
// *sql.Conn satisfy it.
type DB interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// DefaultFenceColumn is the fence column when Table.Fence is empty.
const DefaultFenceColumn = "fence"

// Table describes a fenced InnoDB table: one row per resource key, with a
// BIGINT (or BIGINT UNSIGNED) fence column beside the data.
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

// attempts bounds Upsert's loop between the fenced UPDATE and the INSERT:
// it repeats only when another writer creates (or deletes) the row
// between the two.
const attempts = 4

// prepare validates and quotes the pieces of one write.
func (t Table) prepare(key any, f uint64, set Values) (stmt, error) {
	s, err := fencesql.Prepare(ident, t.Name, t.Key, cmp.Or(t.Fence, DefaultFenceColumn), key, f, set)
	return stmt{s}, err
}

// Update sets the columns in set on the row whose key column equals key,
// and its fence column to f, if the row's fence is not higher than f; one
// statement. A higher fence yields a *fence.StaleError (errors.Is
// fence.ErrStale); a missing row yields an error matching sql.ErrNoRows.
func (t Table) Update(ctx context.Context, db DB, key any, f uint64, set Values) error {
	s, err := t.prepare(key, f, set)
	if err != nil {
		return err
	}
	for range attempts {
		if ok, err := s.update(ctx, db); ok || err != nil {
			return err
		}
		cur, err := s.current(ctx, db)
		if err != nil || cur > f {
			return t.rejected(key, f, cur, err)
		}
	}
	return t.unsettled(key)
}

// Upsert inserts the row (key, fence f, set) or, when the key exists,
// updates it if its fence is not higher than f. The key column needs a
// unique index. A higher fence yields a *fence.StaleError.
//
// The fenced UPDATE runs first, so a row that exists costs one statement;
// only a missing row costs a read and an INSERT.
func (t Table) Upsert(ctx context.Context, db DB, key any, f uint64, set Values) error {
	s, err := t.prepare(key, f, set)
	if err != nil {
		return err
	}
	for range attempts {
		if ok, err := s.update(ctx, db); ok || err != nil {
			return err
		}
		cur, err := s.current(ctx, db)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			if err := s.insert(ctx, db); !isDuplicate(err) {
				return err
			}
		case err != nil || cur > f:
			return t.rejected(key, f, cur, err)
		}
	}
	return t.unsettled(key)
}

// Current returns the fence stored on key's row, read with a shared lock
// (a locking read sees the newest committed fence even inside a
// REPEATABLE READ transaction).
func (t Table) Current(ctx context.Context, db DB, key any) (uint64, error) {
	s, err := t.prepare(key, 1, nil)
	if err != nil {
		return 0, err
	}
	return s.current(ctx, db)
}

// rejected explains a fenced write that did not land, from the read of
// the current fence that followed it.
func (t Table) rejected(key any, f, cur uint64, err error) error {
	return fence.Rejected("mysql", fencesql.Rejected("mysqlfence", t.Name, t.Key, key, f, int64(cur), err, sql.ErrNoRows))
}

// unsettled is the error when the row kept appearing and disappearing.
func (t Table) unsettled(key any) error {
	return fmt.Errorf("mysqlfence: %s: the row with %s = %v was created or deleted by other writers %d times during one write; try again", t.Name, t.Key, key, attempts)
}

// isDuplicate reports a duplicate-key error (1062): another writer
// inserted the key first.
func isDuplicate(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1062
}
