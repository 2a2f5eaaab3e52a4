package pgfence

import (
	"context"
	"fmt"
	"strings"

	"github.com/dlockdev/dlock"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Querier is the part of a pgx connection this package uses. *pgx.Conn,
// *pgxpool.Pool, *pgxpool.Conn and pgx.Tx satisfy it.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// ident quotes a possibly schema-qualified identifier ("billing.accounts").
func ident(name string) (string, error) {
	if name == "" {
		return "", fmt.Errorf("%w: empty SQL identifier", dlock.ErrInvalidArgument)
	}
	parts := strings.Split(name, ".")
	for _, p := range parts {
		if p == "" || strings.ContainsRune(p, 0) {
			return "", fmt.Errorf("%w: SQL identifier %q", dlock.ErrInvalidArgument, name)
		}
	}
	return pgx.Identifier(parts).Sanitize(), nil
}
