package chaos

import (
	"context"
	"errors"

	"github.com/dlockdev/dlock/fence"
	"github.com/dlockdev/dlock/fence/pgfence"
	"github.com/jackc/pgx/v5/pgxpool"
)

// counterStore is the resource S1's holders read and write: one counter
// row per key, in a table with a fence column, in Postgres (pgfence) or
// MySQL (mysqlfence).
type counterStore interface {
	create(ctx context.Context, key string) error
	read(ctx context.Context, key string) (int64, error)
	// write sets key's counter to n, fenced with f or not; ok is false
	// when the fence rejected the write.
	write(ctx context.Context, key string, f uint64, n int64, fenced bool) (ok bool, err error)
	Close()
}

// openCounters connects to the store at db: a MySQL DSN when mysql, a
// Postgres URL otherwise.
func openCounters(ctx context.Context, db string, mysql bool) (counterStore, error) {
	if mysql {
		return openMySQLCounters(db)
	}
	pool, err := pgxpool.New(ctx, db)
	if err != nil {
		return nil, err
	}
	return pgCounters{pool}, nil
}

// pgCounters is the counter table in Postgres.
type pgCounters struct{ pool *pgxpool.Pool }

// pgCounterTable is the fenced counter table for pgfence.
var pgCounterTable = pgfence.Table{Name: "chaos_counter", Key: "id"}

func (c pgCounters) create(ctx context.Context, key string) error {
	_, err := c.pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS chaos_counter (id text PRIMARY KEY, fence bigint NOT NULL DEFAULT 0, n bigint NOT NULL DEFAULT 0)`)
	if err == nil {
		_, err = c.pool.Exec(ctx, `INSERT INTO chaos_counter (id) VALUES ($1)`, key)
	}
	return err
}

func (c pgCounters) read(ctx context.Context, key string) (n int64, err error) {
	err = c.pool.QueryRow(ctx, `SELECT n FROM chaos_counter WHERE id = $1`, key).Scan(&n)
	return n, err
}

func (c pgCounters) write(ctx context.Context, key string, f uint64, n int64, fenced bool) (bool, error) {
	if !fenced {
		_, err := c.pool.Exec(ctx, `UPDATE chaos_counter SET n = $2 WHERE id = $1`, key, n)
		return err == nil, err
	}
	return staleIsFalse(pgCounterTable.Update(ctx, c.pool, key, f, pgfence.Values{"n": n}))
}

func (c pgCounters) Close() { c.pool.Close() }

// staleIsFalse turns a fenced write's error into write's result: a stale
// fence is a refused write, not an error.
func staleIsFalse(err error) (bool, error) {
	if errors.Is(err, fence.ErrStale) {
		return false, nil
	}
	return err == nil, err
}
