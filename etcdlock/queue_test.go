package etcdlock_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/etcdlock"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// queued waits until name has n contender keys (holder and waiters).
func queued(t *testing.T, cli *clientv3.Client, name string, n int64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := cli.Get(context.Background(), etcdlock.DefaultPrefix+url.PathEscape(name)+"/",
			clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		if resp.Count == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%q has %d contenders, want %d", name, resp.Count, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type grant struct {
	who int
	ls  *dlock.Lease
	err error
}

// startWaiter makes waiter who Acquire name for ttl on its own Locker and
// report.
func startWaiter(ctx context.Context, t *testing.T, endpoint, name string, ttl time.Duration, who int, got chan<- grant) {
	l := locker(t, endpoint)
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		ls, err := l.Acquire(ctx, name, dlock.WithTTL(ttl), dlock.WithWait(time.Minute))
		got <- grant{who, ls, err}
	}()
}

// TestFIFO: waiters are granted in the order they queued, and a waiter
// that gives up in the middle of the queue does not break the chain. With
// the wait lease's TTL (waiters queue under the lease of the lock's TTL)
// and a longer one (their keys move to it when granted).
func TestFIFO(t *testing.T) {
	srv := testserver.Etcd(t)
	for _, ttl := range waitTTLs {
		t.Run(fmt.Sprintf("ttl=%s", ttl), func(t *testing.T) { fifo(t, srv, ttl) })
	}
}

// longOnly is ttls in make test-long (testserver.LongRun), else the
// last (the longest) alone.
func longOnly(ttls []time.Duration) []time.Duration {
	if testserver.LongRun() {
		return ttls
	}
	return ttls[len(ttls)-1:]
}

// waitTTLs are the TTLs of the queue tests on the test server: its wait
// lease's (MinTTLFor(250 ms) = MinTTL) and a longer one.
var waitTTLs = []time.Duration{etcdlock.MinTTL, 3 * time.Second}

func fifo(t *testing.T, srv *testserver.EtcdServer, ttl time.Duration) {
	admin := client(t, srv.Endpoint)
	name := "fifo/" + t.Name()
	holder, err := locker(t, srv.Endpoint).Acquire(context.Background(), name, dlock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	const n = 6
	const quitter = 3 // this waiter gives up while queued
	got := make(chan grant, n)
	var cancelQuitter context.CancelFunc
	for i := 1; i <= n; i++ {
		ctx := context.Background()
		if i == quitter {
			ctx, cancelQuitter = context.WithCancel(ctx)
		}
		startWaiter(ctx, t, srv.Endpoint, name, ttl, i, got)
		queued(t, admin, name, int64(i+1))
	}
	cancelQuitter()
	if g := <-got; g.who != quitter || !errors.Is(g.err, context.Canceled) || !errors.Is(g.err, dlock.ErrNotAcquired) {
		t.Fatalf("canceled waiter: got waiter %d, err %v; want %d with context.Canceled", g.who, g.err, quitter)
	}
	queued(t, admin, name, n)
	if err := holder.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	var fences []uint64
	for want := 1; want <= n; want++ {
		if want == quitter {
			continue
		}
		g := <-got
		if g.err != nil || g.who != want {
			t.Fatalf("grant %d went to waiter %d (err %v), want waiter %d", len(fences)+1, g.who, g.err, want)
		}
		fences = append(fences, g.ls.Fence())
		if err := g.ls.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i < len(fences); i++ {
		if fences[i] <= fences[i-1] {
			t.Errorf("fences %v do not increase", fences)
		}
	}
}

// TestWaiterOutlivesTTL: a waiter keeps its own lease alive while it
// waits longer than the TTL and the wait lease, and keeps its place; the
// lease it is granted then lives on (its TTL counts from the grant, not
// from the wait). make test runs the TTL above the wait lease, whose
// waiter moves to another lease when granted; make test-long both.
func TestWaiterOutlivesTTL(t *testing.T) {
	srv := testserver.Etcd(t)
	for _, ttl := range longOnly(waitTTLs) {
		t.Run(fmt.Sprintf("ttl=%s", ttl), func(t *testing.T) { outlive(t, srv, ttl) })
	}
}

func outlive(t *testing.T, srv *testserver.EtcdServer, ttl time.Duration) {
	admin := client(t, srv.Endpoint)
	name := "outlive/" + t.Name()
	holder, err := locker(t, srv.Endpoint).Acquire(context.Background(), name, dlock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan grant, 1)
	startWaiter(context.Background(), t, srv.Endpoint, name, ttl, 1, got)
	queued(t, admin, name, 2)
	time.Sleep(3 * etcdlock.MinTTL)
	queued(t, admin, name, 2) // the waiter's key is still there
	if err := holder.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	g := <-got
	if g.err != nil {
		t.Fatalf("waiter: %v", g.err)
	}
	select {
	case <-g.ls.Done():
		t.Fatalf("lease granted after a long wait ended at once: %v", g.ls.Err())
	case <-time.After(2 * ttl):
	}
	if err := g.ls.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestTTLValidation: etcd leases are whole seconds of at least 2 s; the
// server would silently round 1 s up, so the driver refuses it.
func TestTTLValidation(t *testing.T) {
	srv := testserver.Etcd(t)
	l := locker(t, srv.Endpoint)
	ctx := context.Background()
	_, err := l.Acquire(ctx, "ttl", dlock.WithTTL(time.Second))
	if !errors.Is(err, dlock.ErrInvalidArgument) || !strings.Contains(err.Error(), "1s") || !strings.Contains(err.Error(), "election_timeout") {
		t.Errorf("Acquire with ttl 1s: %v, want ErrInvalidArgument naming 1s, and why the minimum is what it is", err)
	}
	ls, err := l.Acquire(ctx, "ttl", dlock.WithTTL(2500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if ls.TTL() != 3*time.Second {
		t.Errorf("ttl 2.5s granted as %s, want 3s (whole seconds, rounded up)", ls.TTL())
	}
	_ = ls.Release(ctx)
	if caps := l.Capabilities(); caps.MinTTL != 2*time.Second || caps.TTLGranularity != time.Second || caps.MinTTLWhy == "" {
		t.Errorf("Capabilities = %+v", caps)
	}
}

// TestDriverTTLValidation: the driver itself refuses TTLs etcd cannot
// honour exactly, for callers that bypass the Locker's rounding.
func TestDriverTTLValidation(t *testing.T) {
	srv := testserver.Etcd(t)
	drv := locker(t, srv.Endpoint).Driver()
	for _, ttl := range []time.Duration{0, time.Second, 2500 * time.Millisecond} {
		_, err := drv.TryAcquire(context.Background(), driverRequest("d", ttl))
		if !errors.Is(err, dlock.ErrInvalidArgument) || !strings.Contains(err.Error(), ttl.String()) {
			t.Errorf("TryAcquire with ttl %s: %v, want ErrInvalidArgument naming it", ttl, err)
		}
	}
}
