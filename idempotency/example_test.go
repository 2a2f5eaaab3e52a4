package idempotency_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/dlockdev/dlock/idempotency"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A charge runs at most once per subscription and period, and a retry of
// the same call returns the stored receipt. (It needs a PostgreSQL server
// at DLOCK_URL, so it is compiled but not run.)
func ExampleConfig_Store() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DLOCK_URL"))
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	store, err := idempotency.Config{Retention: 30 * 24 * time.Hour, Wait: 10 * time.Second}.Store(pool)
	if err != nil {
		panic(err)
	}
	if err := store.Migrate(ctx); err != nil { // once, at deploy time
		panic(err)
	}
	receipt, err := store.Do(ctx, "charge/sub-42/2026-12", func(ctx context.Context) ([]byte, error) {
		return []byte("receipt ch_1"), nil // the provider's answer
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(string(receipt))
}
