package redisfence_test

import (
	"context"
	"errors"
	"log"

	"github.com/dlockdev/dlock/fence"
	"github.com/dlockdev/dlock/fence/redisfence"
	"github.com/redis/go-redis/v9"
)

// Write a report under a lease's fence. (Compiles only: it needs a server.)
func Example() {
	ctx := context.Background()
	client := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{"localhost:6379"}})
	defer client.Close()
	g, _ := redisfence.New(client)
	var leaseFence uint64 = 34 // lease.Fence()
	err := g.Set(ctx, "report:daily", leaseFence, "totals...")
	if errors.Is(err, fence.ErrStale) {
		log.Print("a newer holder has written the report")
	}
}
