package etcdlock_test

import (
	"context"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/etcdlock"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestHandOffMovesAtFirstRefresh: a release hands the lock to the next
// waiter, whose key waits under the wait lease. A waiter without a
// deadline holds the lock at once on that lease: its lease is provisional
// (it expires with the wait lease) until its first refresh, which moves
// the key to the lease of its TTL, keeping its create revision (its
// fence). Without auto-refresh the key moves before the acquire returns,
// and a waiter with a deadline moves it (its claim) before it is granted.
// The Lockers assume an election timeout of 2 s (a wait lease of 16 s,
// its first refresh 5.3 s after its last renewal), so that the key is
// seen where the grant left it before that refresh even on a slow
// machine; a key found moved already must then show a refreshed lease.
func TestHandOffMovesAtFirstRefresh(t *testing.T) {
	const ttl = 40 * time.Second
	const election = 2 * time.Second
	wait := etcdlock.MinTTLFor(election)
	for _, tc := range []struct {
		name  string
		opts  []dlock.Option
		moved bool // the key is under the TTL's lease when Acquire returns
	}{
		{"forever", []dlock.Option{dlock.WithWait(dlock.Forever)}, false},
		{"forever-no-refresh", []dlock.Option{dlock.WithWait(dlock.Forever), dlock.WithAutoRefresh(false)}, true},
		{"deadline", []dlock.Option{dlock.WithWait(time.Minute)}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := testserver.Etcd(t)
			admin := client(t, srv.Endpoint)
			ctx := context.Background()
			name := "handoff/" + tc.name
			held, err := lockerWith(t, election, srv.Endpoint).Acquire(ctx, name, dlock.WithTTL(ttl))
			if err != nil {
				t.Fatal(err)
			}
			got := make(chan grant, 1)
			b := lockerWith(t, election, srv.Endpoint)
			go func() {
				ls, err := b.Acquire(ctx, name, append(tc.opts, dlock.WithTTL(ttl))...)
				got <- grant{2, ls, err}
			}()
			queued(t, admin, name, 2)
			if err := held.Release(ctx); err != nil {
				t.Fatal(err)
			}
			var g grant
			select {
			case g = <-got:
			case <-time.After(30 * time.Second):
				t.Fatal("the waiter was not granted within 30 s of the release")
			}
			if g.err != nil {
				t.Fatal(g.err)
			}
			defer func() { _ = g.ls.Release(ctx) }()
			lease, left := leaseTTL(t, admin, name), time.Until(g.ls.Expires())
			fence := headRevision(t, admin, name)
			if fence != g.ls.Fence() {
				t.Fatalf("the holder key's create revision is %d, the grant's fence %d", fence, g.ls.Fence())
			}
			if tc.moved {
				if lease != ttl || left <= wait {
					t.Fatalf("granted: the key rides on a lease of %s and the lease ends in %s, want the TTL's %s, past the wait lease's %s", lease, left, ttl, wait)
				}
				return
			}
			if left > wait {
				t.Fatalf("granted: the lease ends in %s, want no later than the wait lease's %s (a provisional grant)", left, wait)
			}
			if lease != wait && lease != ttl {
				t.Fatalf("granted: the key rides on a lease of %s, want the wait lease's %s (or, after the first refresh, the TTL's %s)", lease, wait, ttl)
			}
			if lease == ttl {
				t.Log("the first refresh moved the key before it was read")
			}
			deadline := time.Now().Add(wait)
			for leaseTTL(t, admin, name) != ttl {
				if time.Now().After(deadline) {
					t.Fatalf("the key still rides on the wait lease %s after the grant: the first refresh did not move it", wait)
				}
				time.Sleep(20 * time.Millisecond)
			}
			if f := headRevision(t, admin, name); f != fence {
				t.Fatalf("the move changed the key's create revision from %d to %d", fence, f)
			}
			for time.Until(g.ls.Expires()) <= wait {
				if time.Now().After(deadline) {
					t.Fatalf("the lease still ends within the wait lease (%s) after its key moved", time.Until(g.ls.Expires()))
				}
				time.Sleep(20 * time.Millisecond)
			}
			if err := g.ls.Err(); err != nil {
				t.Fatalf("the lease after its first refresh: %v", err)
			}
		})
	}
}

// TestHandedOffHolderThatStallsFreesTheLockWithTheWaitLease: B (a separate
// process) waits without a deadline and is handed the lock by A's release;
// it is stopped (SIGSTOP) at once, before its first refresh (due 5.3 s
// after its last renewal). Its key is still under its wait lease (16 s:
// the child assumes an election timeout of 2 s), which nobody renews: C
// gets the lock when that lease ends, within its wait of 40 s, which B's
// TTL of 60 s would outlast, with a fence above B's.
func TestHandedOffHolderThatStallsFreesTheLockWithTheWaitLease(t *testing.T) {
	const ttl = 60 * time.Second
	const election = 2 * time.Second
	srv := testserver.Etcd(t)
	admin := client(t, srv.Endpoint)
	ctx := context.Background()
	name := "handoff/stalled"
	held, err := locker(t, srv.Endpoint).Acquire(ctx, name, dlock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	b, granted := startWaiterChild(t, srv, election, name, ttl, "forever")
	queued(t, admin, name, 2)
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	var fence string
	select {
	case fence = <-granted:
	case <-time.After(30 * time.Second):
		t.Fatal("B was not granted within 30 s of the release")
	}
	if err := b.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.Process.Signal(syscall.SIGCONT) }()
	stopped := time.Now()
	c, err := locker(t, srv.Endpoint).Acquire(ctx, name, dlock.WithTTL(ttl), dlock.WithWait(ttl*2/3))
	if err != nil {
		t.Fatalf("C, %s after B stopped: %v (B's handed-off grant outlived its wait lease)", time.Since(stopped).Round(time.Millisecond), err)
	}
	defer func() { _ = c.Release(ctx) }()
	took := time.Since(stopped)
	t.Logf("C granted %s after B stopped (B's fence %s, wait lease %s, TTL %s)", took.Round(time.Millisecond), fence, etcdlock.MinTTLFor(election), ttl)
	if bf, err := strconv.ParseUint(strings.TrimSpace(fence), 10, 64); err != nil || c.Fence() <= bf {
		t.Errorf("C's fence %d is not above B's %q", c.Fence(), fence)
	}
}

// headRevision is the create revision of name's holder key.
func headRevision(t *testing.T, cli *clientv3.Client, name string) uint64 {
	t.Helper()
	kvs := contenders(t, cli, name)
	if len(kvs) == 0 {
		t.Fatalf("no holder key for %q", name)
	}
	return uint64(kvs[0].CreateRevision)
}
