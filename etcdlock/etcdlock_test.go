package etcdlock_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/etcdlock"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

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
	l, err := etcdlock.Config{ElectionTimeout: election}.Locker(client(t, endpoints...))
	if err != nil {
		t.Fatalf("etcdlock.Config.Locker: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() }) // before the client's (cleanups run last-in first-out)
	return l
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
