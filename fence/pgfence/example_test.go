package pgfence_test

import (
	"context"
	"errors"
	"log"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/fence"
	"github.com/dlockdev/dlock/fence/pgfence"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Fence a balance update inside the caller's transaction. (Compiles only:
// it needs a server.)
func Example() {
	ctx := context.Background()
	pool, _ := pgxpool.New(ctx, "postgres://localhost/bank")
	locker, _ := dlock.Open(ctx, "postgres://localhost/bank")
	accounts := pgfence.Table{Name: "accounts", Key: "id", Fence: "fence"}

	// Once, in a migration: reject lower fences even from code that
	// forgets the WHERE clause.
	_ = pgfence.InstallTrigger(ctx, pool, "accounts", "fence")

	lease, err := locker.Acquire(ctx, "accounts/42")
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Release(ctx)
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		return accounts.Update(ctx, tx, 42, lease.Fence(), pgfence.Values{"balance": 100})
	})
	if errors.Is(err, fence.ErrStale) {
		log.Print("a newer holder has written; stopping") // our lease was superseded
	}
}
