package etcdlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/etcdlock"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// leaseOf returns the etcd lease the holder key of name lives under.
func leaseOf(t *testing.T, cli *clientv3.Client, name string) clientv3.LeaseID {
	t.Helper()
	_, lease := head(t, cli, name)
	return lease
}

// leaseAlive reports whether etcd still has lease id.
func leaseAlive(t *testing.T, cli *clientv3.Client, id clientv3.LeaseID) bool {
	t.Helper()
	resp, err := cli.TimeToLive(context.Background(), id)
	if err != nil {
		t.Fatalf("TimeToLive: %v", err)
	}
	return resp.TTL > 0
}

func acquire(t *testing.T, l *dlock.Locker, name string, opts ...dlock.Option) *dlock.Lease {
	t.Helper()
	ls, err := l.Acquire(context.Background(), name, opts...)
	if err != nil {
		t.Fatalf("Acquire %s: %v", name, err)
	}
	return ls
}

// TestSharedLease: locks of one Locker with one TTL share one etcd lease,
// other TTLs get their own, an idle lease is revoked after a third of its
// TTL, and Close revokes what is left.
func TestSharedLease(t *testing.T) {
	srv := testserver.Etcd(t)
	cli := client(t, srv.Endpoint)
	l := locker(t, srv.Endpoint)
	a := acquire(t, l, "shared/a", dlock.WithTTL(2*time.Second))
	b := acquire(t, l, "shared/b", dlock.WithTTL(2*time.Second))
	c := acquire(t, l, "shared/c", dlock.WithTTL(3*time.Second))
	la, lb, lc := leaseOf(t, cli, "shared/a"), leaseOf(t, cli, "shared/b"), leaseOf(t, cli, "shared/c")
	if la != lb {
		t.Errorf("two 2s locks of one Locker use leases %x and %x, want one", la, lb)
	}
	if lc == la {
		t.Errorf("a 3s lock shares the 2s locks' lease %x", la)
	}
	for _, ls := range []*dlock.Lease{a, b, c} {
		if err := ls.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if !leaseAlive(t, cli, la) {
		t.Errorf("the shared lease was revoked at once on release; it should linger for reuse")
	}
	time.Sleep(2*time.Second/3 + 500*time.Millisecond)
	if leaseAlive(t, cli, la) {
		t.Errorf("idle shared lease %x still alive after a third of its TTL", la)
	}
	d := acquire(t, l, "shared/d", dlock.WithTTL(3*time.Second))
	ld := leaseOf(t, cli, "shared/d")
	_ = d // held while the Locker closes
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if leaseAlive(t, cli, ld) {
		t.Errorf("lease %x outlived the Locker's Close", ld)
	}
	resp, err := cli.Leases(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Leases) != 0 {
		t.Errorf("etcd still has %d leases after Close: %+v", len(resp.Leases), resp.Leases)
	}
}

// TestSessionEnded: when the shared lease ends (revoked here, as when it
// expires), every lock under it is lost with "backend session ended".
func TestSessionEnded(t *testing.T) {
	srv := testserver.Etcd(t)
	cli := client(t, srv.Endpoint)
	l := locker(t, srv.Endpoint)
	var leases []*dlock.Lease
	for _, name := range []string{"ended/a", "ended/b", "ended/c"} {
		leases = append(leases, acquire(t, l, name, dlock.WithTTL(3*time.Second)))
	}
	if _, err := cli.Revoke(context.Background(), leaseOf(t, cli, "ended/a")); err != nil {
		t.Fatal(err)
	}
	for _, ls := range leases {
		select {
		case <-ls.Done():
		case <-time.After(3 * time.Second):
			t.Fatalf("%s not lost 3s after its lease was revoked", ls.Name())
		}
		var lost *dlock.LostError
		if !errors.As(ls.Err(), &lost) || lost.Reason != dlock.LostSession {
			t.Errorf("%s: %v, want a loss with reason \"backend session ended\"", ls.Name(), ls.Err())
		}
	}
	// The next acquire takes a new lease.
	ls := acquire(t, l, "ended/a", dlock.WithTTL(3*time.Second))
	if err := ls.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestUnrefreshedKeyExpires: a lock without auto-refresh ends with its own
// TTL (at most a third of it later) although another lock of the same
// Locker keeps the shared lease alive; then someone else can take it.
func TestUnrefreshedKeyExpires(t *testing.T) {
	srv := testserver.Etcd(t)
	ttl := 2 * time.Second
	l := locker(t, srv.Endpoint)
	keeper := acquire(t, l, "sweep/keeper", dlock.WithTTL(ttl))
	manual := acquire(t, l, "sweep/manual", dlock.WithTTL(ttl), dlock.WithAutoRefresh(false))
	other := locker(t, srv.Endpoint)
	ctx, cancel := context.WithTimeout(context.Background(), ttl+ttl/3+3*time.Second)
	defer cancel()
	start := time.Now()
	ls, err := other.Acquire(ctx, "sweep/manual", dlock.WithTTL(ttl), dlock.WithWait(time.Minute))
	if err != nil {
		t.Fatalf("the unrefreshed lock was not freed: %v", err)
	}
	t.Logf("unrefreshed lock free after %s (TTL %s)", time.Since(start).Round(time.Millisecond), ttl)
	if ls.Fence() <= manual.Fence() {
		t.Errorf("fence %d after expiry is not above %d", ls.Fence(), manual.Fence())
	}
	select {
	case <-keeper.Done():
		t.Errorf("the refreshed lock was lost: %v", keeper.Err())
	default:
	}
	_ = ls.Release(context.Background())
	_ = keeper.Release(context.Background())
}

// TestFencesIncreaseReused: one Locker taking one name again and again
// reuses the key (same lease, same slot); the fence, the key's create
// revision, still rises with every grant, also when another Locker takes
// turns.
func TestFencesIncreaseReused(t *testing.T) {
	srv := testserver.Etcd(t)
	l1, l2 := locker(t, srv.Endpoint), locker(t, srv.Endpoint)
	var last uint64
	for i := range 20 {
		l := l1
		if i%5 == 4 {
			l = l2
		}
		ls := acquire(t, l, "reuse", dlock.WithTTL(etcdlock.MinTTL))
		if ls.Fence() <= last {
			t.Fatalf("grant %d: fence %d is not above %d", i, ls.Fence(), last)
		}
		last = ls.Fence()
		if err := ls.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSameNameOneLocker: two goroutines of one Locker on one name get
// distinct keys (slots) and exclude each other.
func TestSameNameOneLocker(t *testing.T) {
	srv := testserver.Etcd(t)
	l := locker(t, srv.Endpoint)
	a := acquire(t, l, "same", dlock.WithTTL(etcdlock.MinTTL))
	if _, err := l.TryAcquire(context.Background(), "same", dlock.WithTTL(etcdlock.MinTTL)); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("second TryAcquire on one Locker: %v, want ErrNotAcquired", err)
	}
	got := make(chan *dlock.Lease, 1)
	go func() {
		ls, err := l.Acquire(context.Background(), "same", dlock.WithTTL(etcdlock.MinTTL), dlock.WithWait(time.Minute))
		if err != nil {
			t.Error(err)
		}
		got <- ls
	}()
	queued(t, client(t, srv.Endpoint), "same", 2)
	select {
	case <-got:
		t.Fatal("a waiter of the same Locker was granted while the lock was held")
	case <-time.After(200 * time.Millisecond):
	}
	if err := a.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	b := <-got
	if b == nil || b.Fence() <= a.Fence() {
		t.Fatalf("waiter: %v", b)
	}
	_ = b.Release(context.Background())
}

// TestLateRefreshLeavesTheNextClaimsKey: a refresh that read its key gone
// (here the key was deleted from outside, as when it expires) and judges
// that only after its own holder released and another contender of the
// same Locker was granted the same key (keys are reused, one slot per
// claim) must not forget that contender's key: its refresh would then say
// it was taken over, and its release would leave the key in etcd, holding
// the lock for as long as the shared lease lived (found as a stall of the
// conformance suite's ExclusionGoroutines: "held by ..., fence 86" for
// two minutes after that holder's "lost: taken over by another holder").
func TestLateRefreshLeavesTheNextClaimsKey(t *testing.T) {
	srv := testserver.Etcd(t)
	admin := client(t, srv.Endpoint)
	drv := rawDriver(t, srv.ElectionTimeout, srv.Endpoint)
	ctx := context.Background()
	name := "late-refresh/" + t.Name()
	a := driver.Request{Name: name, Token: newToken() + newToken(), Owner: "a", TTL: etcdlock.MinTTL}
	b := driver.Request{Name: name, Token: newToken() + newToken(), Owner: "b", TTL: etcdlock.MinTTL}
	if g, err := drv.TryAcquire(ctx, a); err != nil || !g.Acquired {
		t.Fatalf("A: %+v, %v", g, err)
	}
	keyA, _ := head(t, admin, name)
	expire(t, admin, name)
	var bGrant driver.Grant
	var once sync.Once
	etcdlock.SetStepHook(drv, func(step string) {
		if step != "refresh" {
			return
		}
		once.Do(func() { // A's refresh has read its key gone
			_ = drv.Release(ctx, a.Name, a.Token)
			var err error
			if bGrant, err = drv.TryAcquire(ctx, b); err != nil || !bGrant.Acquired {
				t.Errorf("B: %+v, %v", bGrant, err)
			}
		})
	})
	if err := drv.Refresh(ctx, a.Name, a.Token, a.TTL); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("A's late refresh: %v, want not held", err)
	}
	if keyB, _ := head(t, admin, name); keyB != keyA {
		t.Logf("B's key %s is not A's %s: the slot was not reused, the race not set up", keyB, keyA)
	}
	if err := drv.Refresh(ctx, b.Name, b.Token, b.TTL); err != nil {
		t.Errorf("B's refresh after A's late one: %v, want nil (B holds)", err)
	}
	if err := drv.Release(ctx, b.Name, b.Token); err != nil {
		t.Errorf("B's release: %v", err)
	}
	if n := count(t, admin, name); n != 0 {
		t.Errorf("%d keys left after B released: B's key holds the lock", n)
	}
}

// TestSessionCountsLiveKeys: a session's count of the keys still held,
// kept as keys come and go (so that releasing 100,000 leases is not a
// walk over all of them per release), agrees with a walk over its keys
// through grants, a waiter's move to the lock's lease, releases and
// expiries.
func TestSessionCountsLiveKeys(t *testing.T) {
	srv := testserver.Etcd(t)
	l := locker(t, srv.Endpoint)
	ctx := context.Background()
	check := func(when string, want int) {
		t.Helper()
		kept, walked := etcdlock.LiveKeys(l.Driver())
		if kept != walked || (want >= 0 && kept != want) {
			t.Fatalf("%s: sessions count %d live keys, a walk finds %d (want %d)", when, kept, walked, want)
		}
	}
	var held []*dlock.Lease
	for i := range 40 {
		ls, err := l.TryAcquire(ctx, fmt.Sprintf("live/%d", i))
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, ls)
	}
	check("after 40 grants", 40)
	waited := make(chan error, 1)
	go func() {
		ls, err := l.Acquire(ctx, "live/0", dlock.WithWait(10*time.Second))
		if err == nil {
			err = ls.Release(ctx)
		}
		waited <- err
	}()
	time.Sleep(200 * time.Millisecond) // the waiter queued behind live/0
	check("with a waiter queued", -1)
	for _, ls := range held[:20] {
		if err := ls.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-waited; err != nil {
		t.Fatal(err)
	}
	check("after 20 releases and the waiter's turn", 20)
	for _, ls := range held[20:] {
		if err := ls.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	check("after every release", 0)
}
