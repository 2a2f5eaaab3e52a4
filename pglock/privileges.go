package pglock

import (
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// privilegeError adds to the server's "permission denied for table ..."
// the GRANT statements the role needs for this mode's objects, ready to
// run as their owner (docs/postgres.md, Privileges, has the same for the
// default names). It unwraps to the server's error.
func (b *base) privilegeError(pgErr *pgconn.PgError, err error) error {
	if !strings.HasPrefix(pgErr.Message, "permission denied for ") {
		return err
	}
	role := "CURRENT_USER"
	if b.pool != nil {
		role = pgx.Identifier{b.pool.Config().ConnConfig.User}.Sanitize()
	}
	msg := fmt.Sprintf("%v: the role lacks the privileges of pglock's %s mode; as the objects' owner, run: %s (docs/postgres.md, Privileges)",
		err, b.mode, strings.Join(b.grants(role), " "))
	return &rewordedError{msg: msg, err: err}
}

// grants are the GRANT statements that give role every privilege this
// mode's calls need on its objects, and no more.
func (b *base) grants(role string) []string {
	name := func(suffix string) string { return b.suffixed(suffix).Sanitize() }
	rw, seq := b.table, "USAGE"
	if b.mode == Advisory {
		rw, seq = name(holdersSuffix), "USAGE, UPDATE"
	}
	g := []string{
		fmt.Sprintf("GRANT SELECT, INSERT, UPDATE, DELETE ON %s, %s TO %s;", rw, name(runsSuffix), role),
		fmt.Sprintf("GRANT SELECT, INSERT, UPDATE ON %s TO %s;", name(ledgersSuffix), role),
		fmt.Sprintf("GRANT %s ON SEQUENCE %s TO %s;", seq, name(seqSuffix), role),
	}
	if len(b.ident) > 1 {
		g = append([]string{fmt.Sprintf("GRANT USAGE ON SCHEMA %s TO %s;", pgx.Identifier{b.ident[0]}.Sanitize(), role)}, g...)
	}
	return g
}
