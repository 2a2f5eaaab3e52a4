package dlock_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/dlockdev/dlock"
	_ "github.com/dlockdev/dlock/memlock"
)

// A lease handed from one Locker to another, as a parent process hands
// its lease to a worker: Detach ends it in the parent without releasing
// it, and Resume makes it the worker's, with the same fence. A handle
// whose lease is gone is refused with ErrLost.
func ExampleLocker_Resume() {
	ctx := context.Background()
	parent, err := dlock.Open(ctx, "mem://example-resume")
	if err != nil {
		panic(err)
	}
	defer parent.Close()
	worker, err := dlock.Open(ctx, "mem://example-resume") // another process, in life
	if err != nil {
		panic(err)
	}
	defer worker.Close()

	lease, err := parent.Acquire(ctx, "nightly-report")
	if err != nil {
		panic(err)
	}
	handle, err := lease.Detach() // a secret: pass it as one, never log it
	if err != nil {
		panic(err)
	}
	fmt.Println("parent:", lease.Err())

	adopted, err := worker.Resume(ctx, handle)
	if err != nil {
		panic(err)
	}
	fmt.Println("worker holds", adopted)
	if err := adopted.Release(ctx); err != nil {
		panic(err)
	}

	_, err = worker.Resume(ctx, handle)
	fmt.Println("again:", errors.Is(err, dlock.ErrLost))
	// Output:
	// parent: dlock: lease detached
	// worker holds mutex "nightly-report" (fence 1)
	// again: true
}
