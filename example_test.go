package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/memlock"
)

// The whole life of a lease on the in-process backend. Any other backend
// is the same code with another URL (redis://, postgres://, etcd://, ...).
func Example() {
	ctx := context.Background()
	locker, err := dlock.Open(ctx, "mem://example")
	if err != nil {
		panic(err)
	}
	defer locker.Close()

	lease, err := locker.Acquire(ctx, "nightly-report", dlock.WithTTL(30*time.Second))
	if err != nil {
		panic(err)
	}
	fmt.Println("holding", lease.Name(), "with fence", lease.Fence())
	// ... work under lease.Context(ctx), sending lease.Fence() with every write ...
	if err := lease.Release(ctx); err != nil {
		panic(err)
	}
	fmt.Println(lease.Err())
	// Output:
	// holding nightly-report with fence 1
	// dlock: lease released
}

// Do acquires, runs the function under a context canceled on loss, and
// always releases.
func ExampleDo() {
	ctx := context.Background()
	locker, err := dlock.Open(ctx, "mem://example-do")
	if err != nil {
		panic(err)
	}
	defer locker.Close()

	err = dlock.Do(ctx, locker, "invoice-42", func(ctx context.Context, lease *dlock.Lease) error {
		fmt.Println("charging invoice 42 under fence", lease.Fence())
		return nil
	})
	fmt.Println("err:", err)
	// Output:
	// charging invoice 42 under fence 1
	// err: <nil>
}

// A held lock is reported with what the backend knows of its holder.
func ExampleHeldError() {
	ctx := context.Background()
	store := memlock.NewStore()
	alice, _ := memlock.New(store, dlock.WithOwner("alice"))
	bob, _ := memlock.New(store, dlock.WithOwner("bob"))
	defer alice.Close()
	defer bob.Close()

	if _, err := alice.Acquire(ctx, "deploy"); err != nil {
		panic(err)
	}
	_, err := bob.TryAcquire(ctx, "deploy")
	var held *dlock.HeldError
	if errors.As(err, &held) {
		fmt.Printf("%s is held by %s (fence %d)\n", held.Name, held.Owner, held.Fence)
	}
	fmt.Println(errors.Is(err, dlock.ErrNotAcquired))
	// Output:
	// deploy is held by alice (fence 1)
	// true
}

// A lease taken over from outside is lost: Done closes, the Context is
// canceled, and Err says why.
func ExampleLease_Context() {
	ctx := context.Background()
	store := memlock.NewStore()
	locker, _ := memlock.New(store)
	defer locker.Close()

	lease, err := locker.Acquire(ctx, "compaction", dlock.WithTTL(1500*time.Millisecond))
	if err != nil {
		panic(err)
	}
	work := lease.Context(ctx)
	store.Steal("compaction", "someone else", time.Hour) // as if our lease had expired

	<-work.Done() // the watchdog's next refresh, within TTL/3
	fmt.Println(context.Cause(work))
	fmt.Println(errors.Is(lease.Err(), dlock.ErrLost))
	// Output:
	// dlock: lease on "compaction" (fence 1) lost: taken over by another holder
	// true
}

// AcquireAll takes a set of locks in one consistent order, all or nothing.
func ExampleLocker_AcquireAll() {
	ctx := context.Background()
	locker, _ := memlock.New(memlock.NewStore())
	defer locker.Close()

	leases, err := locker.AcquireAll(ctx, []string{"account/bob", "account/alice"})
	if err != nil {
		panic(err)
	}
	for _, l := range leases {
		fmt.Println(l.Name())
	}
	fmt.Println(dlock.ReleaseAll(ctx, leases))
	// Output:
	// account/alice
	// account/bob
	// <nil>
}

// ForceRelease evicts a wedged holder and raises the fence past it.
func ExampleLocker_ForceRelease() {
	ctx := context.Background()
	store := memlock.NewStore()
	worker, _ := memlock.New(store, dlock.WithOwner("worker-7"))
	admin, _ := memlock.New(store)
	defer worker.Close()
	defer admin.Close()

	if _, err := worker.Acquire(ctx, "queue"); err != nil {
		panic(err)
	}
	evicted, ok, fence, err := admin.ForceRelease(ctx, "queue")
	if err != nil {
		panic(err)
	}
	fmt.Println(ok, evicted.Owner, evicted.Fence, "->", fence)
	// Output:
	// true worker-7 1 -> 2
}
