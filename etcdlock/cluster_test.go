package etcdlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/etcdlock"
	"github.com/dlockdev/dlock/internal/testserver"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestClusterMemberStopped: in a 3-member cluster, stopping a member the
// holder's client talks to (the leader, the worst case: an election
// follows) does not lose a healthy lease, and the lock stays exclusive.
func TestClusterMemberStopped(t *testing.T) {
	c := testserver.EtcdCluster(t, 3)
	cli := client(t, c.Endpoints...)
	ctx := context.Background()
	ttl := etcdlock.MinTTLFor(c.ElectionTimeout)
	l := lockerWith(t, c.ElectionTimeout, c.Endpoints...)
	ls, err := l.Acquire(ctx, "cluster", dlock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	leader := leaderOf(t, cli, c)
	// The control: a holder whose client knows only the stopped member
	// cannot refresh, and must hear that its lease is lost.
	alone, err := lockerWith(t, c.ElectionTimeout, leader.Endpoint).Acquire(ctx, "cluster-control", dlock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("stopping the leader %s (%s)", leader.Name, leader.Endpoint)
	leader.Stop()
	select {
	case <-ls.Done():
		t.Fatalf("lease lost after a member stopped: %v", ls.Err())
	case <-time.After(3 * ttl):
	}
	select {
	case <-alone.Done():
		t.Logf("control lease (client on the stopped member only): %v", alone.Err())
	default:
		t.Errorf("the lease of a client that can reach no member was not declared lost")
	}
	other := lockerWith(t, c.ElectionTimeout, survivors(c, leader)...)
	if _, err := other.TryAcquire(ctx, "cluster", dlock.WithTTL(ttl)); err == nil {
		t.Fatal("a second holder acquired the lock while the first still held it")
	}
	if err := ls.Release(ctx); err != nil {
		t.Fatalf("Release after the member stopped: %v", err)
	}
	ls2, err := other.TryAcquire(ctx, "cluster", dlock.WithTTL(ttl))
	if err != nil {
		t.Fatalf("TryAcquire after release: %v", err)
	}
	if ls2.Fence() <= ls.Fence() {
		t.Errorf("fence %d after a leader change is not above %d", ls2.Fence(), ls.Fence())
	}
	_ = ls2.Release(ctx)
}

func leaderOf(t *testing.T, cli *clientv3.Client, c *testserver.EtcdClusterServer) *testserver.EtcdServer {
	t.Helper()
	for _, m := range c.Members {
		st, err := cli.Status(context.Background(), m.Endpoint)
		if err != nil {
			t.Fatalf("status of %s: %v", m.Name, err)
		}
		if st.Header.MemberId == st.Leader {
			return m
		}
	}
	t.Fatal("no leader")
	return nil
}

func survivors(c *testserver.EtcdClusterServer, gone *testserver.EtcdServer) []string {
	var eps []string
	for _, m := range c.Members {
		if m != gone {
			eps = append(eps, m.Endpoint)
		}
	}
	return eps
}
