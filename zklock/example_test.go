package zklock_test

import (
	"context"
	"log"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/zklock"
	"github.com/go-zookeeper/zk"
)

// A Locker on your own ZooKeeper session. Every lock it holds lives as
// long as the session: give zklock the session timeout you connected with.
func ExampleNew() {
	const sessionTimeout = 10 * time.Second
	conn, _, err := zk.Connect([]string{"zk1:2181", "zk2:2181", "zk3:2181"}, sessionTimeout)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	locker, err := zklock.New(conn, zklock.Config{Root: "/myapp/locks", SessionTimeout: sessionTimeout})
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	err = dlock.Do(context.Background(), locker, "nightly-report", func(ctx context.Context, ls *dlock.Lease) error {
		// ctx ends if the session is lost; pass ls.Fence() to every write.
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
}

// Opening from a URL: the ensemble, the root, the session timeout.
func Example_url() {
	ctx := context.Background()
	locker, err := dlock.Open(ctx, "zk://zk1:2181,zk2:2181,zk3:2181/myapp/locks?session_timeout=10s")
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
}
