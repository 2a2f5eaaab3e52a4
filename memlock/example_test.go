package memlock_test

import (
	"context"
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
