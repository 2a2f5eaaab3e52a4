package pglock

import (
	"context"
	"strings"

	"github.com/dlockdev/dlock/driver"
	"github.com/jackc/pgx/v5"
)

var (
	_ driver.MigrationReporter = (*leases)(nil)
	_ driver.MigrationReporter = (*advisory)(nil)
)

// object is a schema object a migration may create, named for `dlock
// migrate`'s report: a relation (table or sequence) named after the
// configured table, or a column added to the lease table by an upgrade.
type object struct {
	kind   string // "table", "sequence" or "column"
	suffix string // appended to the table's name ("" for the table itself)
	column string // for kind "column"
}

// leaseObjects are what leaseDDL creates, in its order.
var leaseObjects = []object{
	{kind: "sequence", suffix: seqSuffix},
	{kind: "table"},
	{kind: "column", column: "dead"},
	{kind: "column", column: "waiters"},
	{kind: "column", column: "reserved"},
	{kind: "table", suffix: runsSuffix},
	{kind: "table", suffix: ledgersSuffix},
}

// advisoryObjects are what advisoryDDL creates.
var advisoryObjects = []object{
	{kind: "sequence", suffix: seqSuffix},
	{kind: "table", suffix: holdersSuffix},
	{kind: "table", suffix: runsSuffix},
	{kind: "table", suffix: ledgersSuffix},
}

// relExists and columnExists tell whether an object exists now; $1 is the
// quoted, possibly schema-qualified relation name.
const (
	relExists    = `SELECT to_regclass($1) IS NOT NULL`
	columnExists = `SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass($1) AND attname = $2 AND attnum > 0 AND NOT attisdropped)`
)

// exists asks whether o exists, inside the migration's transaction.
func (b *base) exists(ctx context.Context, tx pgx.Tx, o object) (bool, error) {
	rel := b.suffixed(o.suffix).Sanitize()
	var ok bool
	var err error
	if o.kind == "column" {
		err = tx.QueryRow(ctx, columnExists, rel, o.column).Scan(&ok)
	} else {
		err = tx.QueryRow(ctx, relExists, rel).Scan(&ok)
	}
	return ok, err
}

// describe names o as `dlock migrate` prints it: "table dlock_leases",
// "column dlock_leases.reserved".
func (b *base) describe(o object) string {
	rel := strings.Join(b.suffixed(o.suffix), ".")
	if o.kind == "column" {
		return "column " + rel + "." + o.column
	}
	return o.kind + " " + rel
}

// migrate runs the steps in one transaction, serialised across
// concurrent migrations by a transaction-scoped advisory lock (CREATE
// TABLE IF NOT EXISTS alone races), and returns the objects among objs
// that it created. A column is reported only when its table existed
// before (an upgrade), not as part of a table created now.
func (b *base) migrate(ctx context.Context, objs []object, steps ...string) ([]string, error) {
	var created []string
	err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", migrateKey); err != nil {
			return err
		}
		before := make([]bool, len(objs))
		for i, o := range objs {
			var err error
			if before[i], err = b.exists(ctx, tx, o); err != nil {
				return err
			}
		}
		for _, s := range steps {
			if _, err := tx.Exec(ctx, b.sql(s)); err != nil {
				return err
			}
		}
		tableBefore := true
		for i, o := range objs {
			if o.kind == "table" && o.suffix == "" {
				tableBefore = before[i]
			}
			if before[i] || (o.kind == "column" && !tableBefore) {
				continue
			}
			ok, err := b.exists(ctx, tx, o)
			if err != nil {
				return err
			}
			if ok {
				created = append(created, b.describe(o))
			}
		}
		return nil
	})
	if err != nil {
		return nil, b.classifyAdmin(err)
	}
	return created, nil
}

// migrateKey is the advisory lock key serialising migrations: the first
// eight bytes of SHA-256("dlock migrate"), see Key.
var migrateKey = Key("dlock migrate")
