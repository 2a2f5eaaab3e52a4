package redlock_test

import (
	"context"
	"fmt"
	"log"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/redlock"
	"github.com/redis/go-redis/v9"
)

// nodeClients connects one client per node listed in DLOCK_URL
// (redlock://host1:port1,host2:port2,host3:port3), which the tests set to
// their servers. ContextTimeoutEnabled lets a request abandoned at the node
// timeout stop at once.
func nodeClients() []redis.UniversalClient {
	u, err := url.Parse(os.Getenv("DLOCK_URL"))
	if err != nil {
		log.Fatal(err)
	}
	var clients []redis.UniversalClient
	for _, addr := range strings.Split(u.Host, ",") {
		clients = append(clients, redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true}))
	}
	return clients
}

func closeClients(clients []redis.UniversalClient) {
	for _, c := range clients {
		_ = c.Close()
	}
}

// A Locker over your own clients, one per independent Redis node, with the
// defaults: a 50 ms node timeout and quorum fencing on.
func ExampleNew() {
	clients := nodeClients()
	defer closeClients(clients)
	locker, err := redlock.New(clients, dlock.WithTTL(10*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close() // leaves the clients open
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

// A Locker with a longer node timeout, for nodes far from this process.
// Each grant's fence is agreed by a majority of the nodes, so it grows from
// one holder to the next even when a node fails in between.
func ExampleConfig_Locker() {
	clients := nodeClients()
	defer closeClients(clients)
	cfg := redlock.Config{NodeTimeout: 200 * time.Millisecond}
	locker, err := cfg.Locker(clients, dlock.WithTTL(5*time.Second))
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

// Opening from a URL builds one client per listed node and closes them
// with the Locker; the query holds the driver's keys (node_timeout,
// fencing, tls), go-redis's (dial_timeout, pool_size...) and dlock's (ttl,
// wait, owner).
func Example_open() {
	ctx := context.Background()
	// e.g. redlock://:secret@redis1:6379,redis2:6379,redis3:6379?node_timeout=50ms&ttl=10s
	locker, err := dlock.Open(ctx, os.Getenv("DLOCK_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	ls, err := locker.Acquire(ctx, "nightly-report")
	if err != nil {
		log.Fatal(err)
	}
	defer ls.Release(ctx)
	fmt.Println("acquired nightly-report, fence > 0:", ls.Fence() > 0)
	// Output: acquired nightly-report, fence > 0: true
}
