package pgfence_test

import (
	"context"
	"errors"
	"log"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/fence"
	"github.com/dlockdev/dlock/fence/pgfence"
	_ "github.com/dlockdev/dlock/pglock" // registers postgres:// for dlock.Open
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Fence a balance update inside the caller's transaction. (Compiles only:
// it needs a server.)
func Example() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://localhost/bank")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	locker, err := dlock.Open(ctx, "postgres://localhost/bank")
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	accounts := pgfence.Table{Name: "accounts", Key: "id", Fence: "fence"}

	// Once, in a migration: reject lower fences even from code that
	// forgets the WHERE clause.
	if err := pgfence.InstallTrigger(ctx, pool, "accounts", "fence"); err != nil {
		log.Fatal(err)
	}

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
