package idempotency

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DB is the part of pgx the Store uses; *pgxpool.Pool satisfies it. It
// must be safe for concurrent use (the heartbeat runs beside fn), so a
// single *pgx.Conn or a pgx.Tx will not do.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Store keeps idempotency keys and results in one PostgreSQL table. It is
// safe for concurrent use.
type Store struct {
	db    DB
	cfg   Config // resolved: no zero fields
	table string // quoted
}

func ident(name string) (string, error) {
	parts := strings.Split(name, ".")
	for _, p := range parts {
		if p == "" || strings.ContainsRune(p, 0) {
			return "", invalid("Config.Table %q: each dot-separated part must be non-empty and without NUL", name)
		}
	}
	return pgx.Identifier(parts).Sanitize(), nil
}

// Migrate creates the table and its index if they do not exist.
func (s *Store) Migrate(ctx context.Context) error {
	index, _ := ident(strings.ReplaceAll(s.cfg.Table, ".", "_") + "_expires")
	sql := fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (
	key         text PRIMARY KEY,
	state       text NOT NULL CHECK (state IN ('running', 'done')),
	token       text NOT NULL,
	owner       text NOT NULL,
	result      bytea,
	started_at  timestamptz NOT NULL,
	finished_at timestamptz,
	expires_at  timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS %s ON %s (expires_at)`, s.table, index, s.table)
	if _, err := s.db.Exec(ctx, sql); err != nil {
		return fmt.Errorf("idempotency: migrate %s: %w", s.cfg.Table, err)
	}
	return nil
}

// Purge deletes every expired row: results past their retention and
// claims abandoned by crashed callers. It returns how many it deleted.
func (s *Store) Purge(ctx context.Context) (int64, error) {
	tag, err := s.db.Exec(ctx, "DELETE FROM "+s.table+" WHERE expires_at < now()")
	if err != nil {
		return 0, fmt.Errorf("idempotency: purge: %w", err)
	}
	return tag.RowsAffected(), nil
}

func ms(d time.Duration) int64 { return d.Milliseconds() }
