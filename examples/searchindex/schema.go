package main

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"
)

// setup creates the products, an empty live index, and the table of
// rebuild runs (who started which rebuild, when: the 409 answer).
func setup(ctx context.Context, db *pgxpool.Pool, products int) error {
	for _, sql := range []string{
		`CREATE TABLE IF NOT EXISTS products (id int PRIMARY KEY, name text NOT NULL)`,
		`CREATE TABLE IF NOT EXISTS search_index (product_id int PRIMARY KEY, document tsvector NOT NULL, generation bigint NOT NULL)`,
		`CREATE TABLE IF NOT EXISTS rebuild_runs (fence bigint PRIMARY KEY, owner text NOT NULL,
			started_at timestamptz NOT NULL DEFAULT now(), finished_at timestamptz)`,
	} {
		if _, err := db.Exec(ctx, sql); err != nil {
			return err
		}
	}
	_, err := db.Exec(ctx, `INSERT INTO products (id, name)
		SELECT i, 'product ' || i || ' ' || md5(i::text) FROM generate_series(1, $1) i
		ON CONFLICT DO NOTHING`, products)
	return err
}
