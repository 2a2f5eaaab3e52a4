package main

import (
	"context"
	"fmt"
	"io"

	"github.com/dlockdev/dlock/fence/pgfence"
	"github.com/dlockdev/dlock/idempotency"
	"github.com/jackc/pgx/v5/pgxpool"
)

func connect(ctx context.Context, url string) (*pgxpool.Pool, error) {
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, err
	}
	return pool, pool.Ping(ctx)
}

// setup creates the subscriptions, the payment provider's ledger (the
// external side effect: it charges whatever it is asked to charge), the
// idempotency table, and the fence trigger on subscriptions.
func setup(ctx context.Context, db *pgxpool.Pool, subs int) error {
	_, err := db.Exec(ctx, `
CREATE TABLE IF NOT EXISTS subscriptions (
	id                  int PRIMARY KEY,
	active              bool NOT NULL DEFAULT true,
	last_charged_period text NOT NULL DEFAULT '',
	fence               bigint NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS payments (
	id      bigserial PRIMARY KEY,
	sub_id  int NOT NULL,
	period  text NOT NULL,
	host    text NOT NULL,
	at      timestamptz NOT NULL DEFAULT clock_timestamp()
)`)
	if err != nil {
		return err
	}
	_, err = db.Exec(ctx, `INSERT INTO subscriptions (id) SELECT generate_series(1, $1) ON CONFLICT DO NOTHING`, subs)
	if err != nil {
		return err
	}
	store, err := idempotency.New(db)
	if err != nil {
		return err
	}
	if err := store.Migrate(ctx); err != nil {
		return err
	}
	return pgfence.InstallTrigger(ctx, db, "subscriptions", "fence")
}

// due lists the active subscriptions not yet charged for period.
func due(ctx context.Context, db *pgxpool.Pool, period string) ([]int, error) {
	rows, err := db.Query(ctx, `SELECT id FROM subscriptions WHERE active AND last_charged_period < $1 ORDER BY id`, period)
	if err != nil {
		return nil, err
	}
	var ids []int
	for rows.Next() {
		var id int
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// charge asks the payment provider to charge sub: it always does.
func charge(ctx context.Context, db *pgxpool.Pool, sub int, period, host string) (int64, error) {
	var id int64
	err := db.QueryRow(ctx, `INSERT INTO payments (sub_id, period, host) VALUES ($1, $2, $3) RETURNING id`, sub, period, host).Scan(&id)
	return id, err
}

// report prints, for period, how many subscriptions were charged and how
// many were charged more than once.
func report(ctx context.Context, db *pgxpool.Pool, period string, out io.Writer) error {
	var charged, doubles, payments int
	err := db.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE n > 1), coalesce(sum(n), 0)
		FROM (SELECT sub_id, count(*) AS n FROM payments WHERE period = $1 GROUP BY sub_id) c`, period).Scan(&charged, &doubles, &payments)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "period %s: %d subscriptions charged, %d payments, %d double-charged\n", period, charged, payments, doubles)
	return nil
}
