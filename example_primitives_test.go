package dlock_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/dlockdev/dlock"
)

// A semaphore of 2 permits: a third holder is refused (or waits).
func ExampleSemaphore() {
	ctx := context.Background()
	locker, err := dlock.Open(ctx, "mem://example-semaphore")
	if err != nil {
		panic(err)
	}
	defer locker.Close()

	sem, err := locker.Semaphore("exports", 2)
	if err != nil {
		panic(err)
	}
	a, _ := sem.Acquire(ctx)
	b, _ := sem.Acquire(ctx)
	_, err = sem.TryAcquire(ctx)
	fmt.Println("third:", errors.Is(err, dlock.ErrNotAcquired))
	fmt.Println("kinds:", a.Kind(), b.Kind(), "distinct permits:", a.Slot() != b.Slot())
	_ = a.Release(ctx)
	_ = b.Release(ctx)
	// Output:
	// third: true
	// kinds: permit permit distinct permits: true
}

// A leader's term is its fence: the next leader's is higher.
func ExampleElection() {
	ctx := context.Background()
	locker, err := dlock.Open(ctx, "mem://example-election")
	if err != nil {
		panic(err)
	}
	defer locker.Close()

	election, err := locker.Election("scheduler")
	if err != nil {
		panic(err)
	}
	first, _ := election.Campaign(ctx, "node-a")
	leader, _, _ := election.Leader(ctx)
	fmt.Println("leader:", leader.Owner, "term", first.Fence())
	_ = first.Release(ctx) // resign
	second, _ := election.Campaign(ctx, "node-b")
	fmt.Println("next term is higher:", second.Fence() > first.Fence())
	_ = second.Release(ctx)
	// Output:
	// leader: node-a term 1
	// next term is higher: true
}

// Readers share; a writer waits for them, and its fence orders it after
// every read.
func ExampleRWMutex() {
	ctx := context.Background()
	locker, err := dlock.Open(ctx, "mem://example-rwmutex")
	if err != nil {
		panic(err)
	}
	defer locker.Close()

	rw, err := locker.RWMutex("catalog")
	if err != nil {
		panic(err)
	}
	r1, _ := rw.RLock(ctx)
	r2, _ := rw.RLock(ctx)
	_, err = rw.Lock(ctx, dlock.WithWait(0))
	fmt.Println("writer while reading:", errors.Is(err, dlock.ErrNotAcquired))
	_ = r1.Release(ctx)
	_ = r2.Release(ctx)
	w, _ := rw.Lock(ctx)
	fmt.Println("write fence above the reads':", w.Fence() > r1.Fence() && w.Fence() > r2.Fence())
	_ = w.Release(ctx)
	// Output:
	// writer while reading: true
	// write fence above the reads': true
}
