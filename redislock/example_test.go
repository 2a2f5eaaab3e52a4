package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/redislock"
	"github.com/redis/go-redis/v9"
)

// redisClient builds a go-redis client from DLOCK_URL
// (redis://host:port[/db]), set by the tests to their server.
func redisClient() *redis.Client {
	opt, err := redis.ParseURL(os.Getenv("DLOCK_URL"))
	if err != nil {
		log.Fatal(err)
	}
	opt.ContextTimeoutEnabled = true // calls return by their context's deadline
	return redis.NewClient(opt)
}

// A Locker on your own go-redis client, with the defaults: keys under
// "dlock:", waiters queued first come first served. dlock.Do holds the
// lock while the function runs and releases it after.
func ExampleNew() {
	client := redisClient()
	defer client.Close()
	locker, err := redislock.New(client, dlock.WithTTL(10*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	err = dlock.Do(context.Background(), locker, "nightly-report", func(ctx context.Context, ls *dlock.Lease) error {
		// ctx ends if the lease is lost; pass ls.Fence() to every write.
		fmt.Println("acquired nightly-report")
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output: acquired nightly-report
}

// A Locker with its own key prefix, whose waiters race instead of
// queueing, and no replica confirmation (ReplicaSync 0: a server without
// replicas). Each grant's fence is larger than the one before.
func ExampleConfig_Locker() {
	client := redisClient()
	defer client.Close()
	cfg := redislock.Config{Prefix: "myapp:locks:", ReplicaSync: 0, NoFairQueue: true}
	locker, err := cfg.Locker(client, dlock.WithTTL(5*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	ctx := context.Background()
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

// Opening from a URL builds the client, and closes it with the Locker.
// The URL carries go-redis's settings (dial_timeout, pool_size, ...), the
// driver's (prefix, fair, replica_sync, replica_timeout) and dlock's
// (ttl, wait, owner). A second Locker cannot take the held lock.
func Example_open() {
	ctx := context.Background()
	url := os.Getenv("DLOCK_URL") + "?prefix=myapp:&ttl=10s" // e.g. redis://:password@redis:6379/0?prefix=myapp:&ttl=10s
	locker, err := dlock.Open(ctx, url)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	ls, err := locker.TryAcquire(ctx, "nightly-report")
	if err != nil {
		log.Fatal(err)
	}
	defer ls.Release(ctx)
	fmt.Println("acquired nightly-report")

	other, err := dlock.Open(ctx, url)
	if err != nil {
		log.Fatal(err)
	}
	defer other.Close()
	_, err = other.TryAcquire(ctx, "nightly-report")
	fmt.Println("second locker refused:", errors.Is(err, dlock.ErrNotAcquired))
	// Output:
	// acquired nightly-report
	// second locker refused: true
}
