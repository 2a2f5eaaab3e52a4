package etcdlock_test

import (
	"context"
	"fmt"
	"log"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/etcdlock"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// endpoints reads the etcd endpoints from DLOCK_URL
// (etcd://host:port[,host:port...]), set by the tests to their server.
func endpoints() []string {
	u, err := url.Parse(os.Getenv("DLOCK_URL"))
	if err != nil {
		log.Fatal(err)
	}
	return strings.Split(u.Host, ",")
}

// A Locker on your own etcd client, with the defaults: locks under
// etcdlock.DefaultPrefix, TTLs of at least 8 s (etcd's default 1 s
// election timeout).
func ExampleNew() {
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	locker, err := etcdlock.New(cli, dlock.WithTTL(10*time.Second))
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

// A Locker with its own key prefix, on a cluster whose members run with
// --election-timeout=250ms. Each grant's fence is the create revision of
// its key, so it grows from one holder to the next.
func ExampleConfig_Locker() {
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	cfg := etcdlock.Config{Prefix: "myapp/locks/", ElectionTimeout: 250 * time.Millisecond}
	locker, err := cfg.Locker(cli, dlock.WithTTL(2*time.Second))
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

// Opening from a URL builds and closes the client; the URL names the
// endpoints and the driver's settings (prefix, election_timeout,
// dial_timeout) and dlock's (ttl, wait, owner).
func Example_open() {
	ctx := context.Background()
	locker, err := dlock.Open(ctx, os.Getenv("DLOCK_URL")) // e.g. etcd://etcd1:2379,etcd2:2379?ttl=10s
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
	// Output: acquired nightly-report
}
