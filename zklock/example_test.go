package zklock_test

import (
	"context"
	"fmt"
	"log"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/zklock"
	"github.com/go-zookeeper/zk"
)

// A Locker on your own ZooKeeper session. Every lock it holds lives as
// long as the session: give zklock the session timeout you connected with
// (ZooKeeper does not tell the client, so there is no zklock.New).
func ExampleConfig_Locker() {
	// DLOCK_URL is zk://host:port[,host:port...], e.g. zk://zk1:2181,zk2:2181,zk3:2181.
	u, err := url.Parse(os.Getenv("DLOCK_URL"))
	if err != nil {
		log.Fatal(err)
	}
	const sessionTimeout = 10 * time.Second
	conn, _, err := zk.Connect(strings.Split(u.Host, ","), sessionTimeout, zk.WithLogInfo(false))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	locker, err := zklock.Config{Root: "/myapp/locks", SessionTimeout: sessionTimeout}.Locker(conn)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	err = dlock.Do(context.Background(), locker, "nightly-report", func(ctx context.Context, ls *dlock.Lease) error {
		// ctx ends if the session is lost; pass ls.Fence() to every write.
		fmt.Println("holding nightly-report, fence above 0:", ls.Fence() > 0)
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output: holding nightly-report, fence above 0: true
}

// Opening from a URL: the ensemble, the root, the session timeout.
func Example_open() {
	ctx := context.Background()
	// e.g. zk://zk1:2181,zk2:2181,zk3:2181/myapp/locks?session_timeout=10s
	locker, err := dlock.Open(ctx, os.Getenv("DLOCK_URL")+"/myapp/locks?session_timeout=10s")
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	first, err := locker.TryAcquire(ctx, "invoices")
	if err != nil {
		log.Fatal(err)
	}
	_ = first.Release(ctx)
	second, err := locker.TryAcquire(ctx, "invoices")
	if err != nil {
		log.Fatal(err)
	}
	defer second.Release(ctx)
	fmt.Println("fence increased:", second.Fence() > first.Fence())
	// Output: fence increased: true
}
