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

// A Locker in lease mode on your own pool, with the default table
// dlock_leases. Migrate creates the table and its fence sequence once
// (idempotent; `dlock migrate --url ...` does the same). The pool stays
// yours: Close the Locker, then the pool.
func ExampleNew() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DLOCK_URL")) // e.g. postgres://app@db:5432/app
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	locker, err := pglock.New(pool, dlock.WithTTL(10*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	if err := locker.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	err = dlock.Do(ctx, locker, "nightly-report", func(ctx context.Context, ls *dlock.Lease) error {
		// ctx ends if the lease is lost; pass ls.Fence() to every write.
		fmt.Println("acquired nightly-report")
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output: acquired nightly-report
}

// A Locker in lease mode on a table of your own (created by Migrate).
// Every grant draws its fence from the table's sequence, so the fence
// grows from one holder to the next.
func ExampleConfig_Locker() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DLOCK_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	cfg := pglock.Config{Mode: pglock.Lease, Table: "myapp_locks"}
	locker, err := cfg.Locker(pool, dlock.WithTTL(5*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	if err := locker.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	var fences []uint64
	for range 2 {
		ls, err := locker.Acquire(ctx, "invoice-42")
		if err != nil {
			log.Fatal(err)
		}
		fences = append(fences, ls.Fence())
		if err := ls.Release(ctx); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println("fence increased:", fences[1] > fences[0])
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

// Opening from a URL builds a pool of its own, closed by Locker.Close.
// The URL is pgx's, plus this package's mode and table and dlock's ttl,
// wait and owner.
func Example_open() {
	ctx := context.Background()
	locker, err := dlock.Open(ctx, os.Getenv("DLOCK_URL")) // e.g. postgres://app@db/app?mode=advisory&ttl=10s
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	if err := locker.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	ls, err := locker.TryAcquire(ctx, "nightly-report")
	if err != nil {
		log.Fatal(err)
	}
	defer ls.Release(ctx)
	fmt.Println("acquired nightly-report")
	// Output: acquired nightly-report
}
