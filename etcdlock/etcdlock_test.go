package etcdlock_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/dlocktest"
	"github.com/dlockdev/dlock/etcdlock"
	"github.com/dlockdev/dlock/internal/testserver"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

func TestMain(m *testing.M) { dlocktest.Main(m) }

func TestConformance(t *testing.T) {
	srv := testserver.Etcd(t)
	admin := client(t, srv.Endpoint)
	dlocktest.Run(t, dlocktest.Harness{
		New:          func(t testing.TB) *dlock.Locker { return locker(t, srv.Endpoint) },
		URL:          srv.URL(),
		TTL:          etcdlock.MinTTL,
		Expire:       func(t testing.TB, name string) { expire(t, admin, name) },
		Steal:        func(t testing.TB, name string) { steal(t, admin, name) },
		NewStoppable: newStoppable,
	})
}

// client connects to endpoints and closes the client when t ends.
func client(t testing.TB, endpoints ...string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: endpoints, DialTimeout: 10 * time.Second, Logger: zap.NewNop(),
	})
	if err != nil {
		t.Fatalf("etcd client: %v", err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// locker opens a Locker on its own client to single-member servers
// (testserver.Etcd, with its short election timeout: 2 s TTLs).
func locker(t testing.TB, endpoints ...string) *dlock.Locker {
	t.Helper()
	return lockerWith(t, testserver.SingleElectionTimeout, endpoints...)
}

// lockerWith opens a Locker on its own client to a cluster with the
// given election timeout.
func lockerWith(t testing.TB, election time.Duration, endpoints ...string) *dlock.Locker {
	t.Helper()
	l, err := etcdlock.NewWithConfig(client(t, endpoints...), etcdlock.Config{ElectionTimeout: election})
	if err != nil {
		t.Fatalf("etcdlock.NewWithConfig: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() }) // before the client's (cleanups run last-in first-out)
	return l
}

func newStoppable(t testing.TB) (*dlock.Locker, func()) {
	srv := testserver.Etcd(t)
	return locker(t, srv.Endpoint), srv.Stop
}

// head returns the holder key of name and its lease (names are
// path-escaped in keys, as the package does).
func head(t testing.TB, cli *clientv3.Client, name string) (key string, lease clientv3.LeaseID) {
	t.Helper()
	resp, err := cli.Get(context.Background(), etcdlock.DefaultPrefix+url.PathEscape(name)+"/", clientv3.WithFirstCreate()...)
	if err != nil {
		t.Fatalf("get holder of %q: %v", name, err)
	}
	if len(resp.Kvs) == 0 {
		t.Fatalf("no holder key for %q", name)
	}
	return string(resp.Kvs[0].Key), clientv3.LeaseID(resp.Kvs[0].Lease)
}

// expire deletes the holder's key, as the driver does when a lock's own
// TTL has run out under a lease other locks still keep alive. (Revoking
// the shared lease ends every lock under it: TestSessionEnded.)
func expire(t testing.TB, cli *clientv3.Client, name string) {
	t.Helper()
	key, _ := head(t, cli, name)
	if _, err := cli.Delete(context.Background(), key); err != nil {
		t.Fatalf("delete: %v", err)
	}
}

// steal deletes the holder's key and puts a foreign contender in its place.
func steal(t testing.TB, cli *clientv3.Client, name string) {
	t.Helper()
	ctx := context.Background()
	key, _ := head(t, cli, name)
	lease, err := cli.Grant(ctx, 60)
	if err != nil {
		t.Fatalf("grant: %v", err)
	}
	foreign := etcdlock.DefaultPrefix + url.PathEscape(name) + "/0000000000000000000000000000f0e1"
	if _, err := cli.Txn(ctx).Then(clientv3.OpDelete(key), clientv3.OpPut(foreign, "thief", clientv3.WithLease(lease.ID))).Commit(); err != nil {
		t.Fatalf("steal: %v", err)
	}
}
