package memlock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/memlock"
)

// In a unit test, give the code under test a Locker on a private Store,
// and use the Store to simulate what a real backend can do to a holder.
func ExampleNew() {
	ctx := context.Background()
	store := memlock.NewStore()
	locker, err := memlock.New(store, dlock.WithTTL(1500*time.Millisecond))
	if err != nil {
		panic(err)
	}
	defer locker.Close()

	lease, err := locker.Acquire(ctx, "report")
	if err != nil {
		panic(err)
	}
	store.Expire("report") // as if the holder had paused past its TTL
	<-lease.Done()         // the watchdog notices at its next refresh
	fmt.Println(lease.Err())
	// Output:
	// dlock: lease on "report" (fence 1) lost: expired
}

// Two Lockers on one Store contend as two processes on one server would;
// the fence increases with every grant.
func ExampleConfig_Locker() {
	ctx := context.Background()
	store := memlock.NewStore()
	a, err := memlock.Config{}.Locker(store, dlock.WithOwner("a"))
	if err != nil {
		panic(err)
	}
	defer a.Close()
	b, err := memlock.Config{}.Locker(store, dlock.WithOwner("b"))
	if err != nil {
		panic(err)
	}
	defer b.Close()

	first, err := a.Acquire(ctx, "job")
	if err != nil {
		panic(err)
	}
	if _, err := b.TryAcquire(ctx, "job"); err != nil {
		fmt.Println("b not acquired:", errors.Is(err, dlock.ErrNotAcquired))
	}
	if err := first.Release(ctx); err != nil {
		panic(err)
	}
	second, err := b.Acquire(ctx, "job")
	if err != nil {
		panic(err)
	}
	defer second.Release(ctx)
	fmt.Println("b acquired, fence increased:", second.Fence() > first.Fence())
	// Output:
	// b not acquired: true
	// b acquired, fence increased: true
}

// dlock.Open with a mem:// URL shares one named Store per process, so code
// that takes a URL can be tested without a server.
func Example_url() {
	ctx := context.Background()
	locker, err := dlock.Open(ctx, "mem://example?ttl=5s")
	if err != nil {
		panic(err)
	}
	defer locker.Close()
	lease, err := locker.TryAcquire(ctx, "job")
	if err != nil {
		panic(err)
	}
	defer lease.Release(ctx)
	fmt.Println("acquired, fence", lease.Fence())
	// Output:
	// acquired, fence 1
}
