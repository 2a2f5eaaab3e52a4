package pglock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/pglock"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A Locker on your own pgx pool, in lease mode (the default): one row per
// lock name in dlock_leases, a fence from one sequence. Migrate creates
// them once (or run `dlock migrate --url ...`).
func ExampleNew() {
	ctx := context.Background()
	// DLOCK_URL is a Postgres URL, e.g. postgres://app:secret@db:5432/app.
	pool, err := pgxpool.New(ctx, os.Getenv("DLOCK_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	locker, err := pglock.New(pool, dlock.WithTTL(30*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	if err := locker.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	err = dlock.Do(ctx, locker, "nightly-report", func(ctx context.Context, ls *dlock.Lease) error {
		// ctx ends if the lease is lost; pass ls.Fence() to every write.
		fmt.Println("holding nightly-report, fence above 0:", ls.Fence() > 0)
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output: holding nightly-report, fence above 0: true
}

// Advisory mode: the lock is pg_advisory_lock on a connection pinned for
// the lease, and ends with that session. Its own table of holders and its
// fence sequence are created by Migrate.
func ExampleConfig_Locker() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DLOCK_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	locker, err := pglock.Config{Mode: pglock.Advisory}.Locker(pool)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	if err := locker.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	first, err := locker.TryAcquire(ctx, "invoices")
	if err != nil {
		log.Fatal(err)
	}
	_ = first.Release(ctx)
	second, err := locker.TryAcquire(ctx, "invoices")
	if err != nil {
		log.Fatal(err)
	}
	defer second.Release(ctx)
	fmt.Println("fence increased:", second.Fence() > first.Fence())
	// Output: fence increased: true
}

// A Locker in advisory mode: each held lock is a session advisory lock on
// a pool connection pinned for the lease, freed at once if the holder's
// process dies. Size pool_max_conns for the leases held at once.
func ExampleNewAdvisory() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DLOCK_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	locker, err := pglock.NewAdvisory(pool)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	if err := locker.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	ls, err := locker.TryAcquire(ctx, "rebuild-index")
	if err != nil {
		log.Fatal(err)
	}
	_, err = locker.TryAcquire(ctx, "rebuild-index")
	fmt.Println("second attempt refused:", errors.Is(err, dlock.ErrNotAcquired))
	if err := ls.Release(ctx); err != nil {
		log.Fatal(err)
	}
	// Output: second attempt refused: true
}

// Opening from a URL: mode, table and pool settings are query keys, e.g.
// postgres://app:secret@db:5432/app?mode=advisory (lease mode without it).
func Example_open() {
	ctx := context.Background()
	locker, err := dlock.Open(ctx, os.Getenv("DLOCK_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	if err := locker.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	ls, err := locker.TryAcquire(ctx, "open-example")
	if err != nil {
		log.Fatal(err)
	}
	defer ls.Release(ctx)
	fmt.Println("acquired", ls.Name())
	// Output: acquired open-example
}
