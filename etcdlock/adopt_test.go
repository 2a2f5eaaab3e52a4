package etcdlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestAdoptOutlivesGrantorsSweepAndClose: a lock that Locker A granted,
// detached and B resumed lives under B's lease. A goes on holding another
// lock, so its shared lease keeps being renewed, and each renewal deletes
// the keys A no longer asks for: the handed-on key, moved away, must not be
// among them. A's own attempts on the name while B holds it are refused
// without touching B's key (A's slot for it is never reused), and closing
// A (which revokes its shared lease) leaves B holding the lock.
func TestAdoptOutlivesGrantorsSweepAndClose(t *testing.T) {
	srv := testserver.Etcd(t)
	ctx := context.Background()
	a, b, other := locker(t, srv.Endpoint), locker(t, srv.Endpoint), locker(t, srv.Endpoint)
	const ttl = 2 * time.Second
	keep, err := a.TryAcquire(ctx, "keep", dlock.WithTTL(ttl))
	if err != nil {
		t.Fatalf("TryAcquire(keep): %v", err)
	}
	defer keep.Release(ctx)
	granted, err := a.TryAcquire(ctx, "handed", dlock.WithTTL(ttl))
	if err != nil {
		t.Fatalf("TryAcquire(handed): %v", err)
	}
	handle, err := granted.Detach()
	if err != nil {
		t.Fatalf("Detach: %v", err)
	}
	adopted, err := b.Resume(ctx, handle)
	if err != nil {
		t.Fatalf("Resume: %v", err)
	}
	// A's lease is renewed every TTL/3 for "keep"; the handed-on key is
	// a TTL old at the renewals after the first TTL.
	time.Sleep(2 * ttl)
	if err := adopted.Err(); err != nil {
		t.Fatalf("adopted lease lost while its grantor's shared lease was renewed: %v", err)
	}
	expectTaken(t, other, "handed")
	expectTaken(t, a, "handed")
	waitCtx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	if ls, err := a.Acquire(waitCtx, "handed", dlock.WithTTL(ttl)); err == nil {
		t.Fatalf("A acquired %q, fence %d, while B held it", ls.Name(), ls.Fence())
	}
	if err := adopted.Refresh(ctx, ttl); err != nil {
		t.Fatalf("adopted lease's Refresh after A tried for its name: %v", err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("closing A: %v", err)
	}
	if err := adopted.Refresh(ctx, ttl); err != nil {
		t.Fatalf("adopted lease's Refresh after A closed: %v", err)
	}
	expectTaken(t, other, "handed")
	if err := adopted.Release(ctx); err != nil {
		t.Fatalf("Release of the adopted lease: %v", err)
	}
	again, err := other.TryAcquire(ctx, "handed", dlock.WithTTL(ttl))
	if err != nil {
		t.Fatalf("TryAcquire after the adopted lease was released: %v", err)
	}
	again.Release(ctx)
}

// expectTaken checks that l cannot take name now.
func expectTaken(t *testing.T, l *dlock.Locker, name string) {
	t.Helper()
	ls, err := l.TryAcquire(context.Background(), name, dlock.WithTTL(2*time.Second))
	if err == nil {
		ls.Release(context.Background())
		t.Fatalf("TryAcquire(%q) succeeded while the lock was held elsewhere", name)
	}
	if !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryAcquire(%q) = %v, want ErrNotAcquired", name, err)
	}
}

// TestAdoptRefusesKeyWithoutDigest: a lock key whose value is its owner
// alone, as earlier versions of the driver wrote it, proves no token
// holds it: Resume is refused with ErrLost, and the key is left as it was.
func TestAdoptRefusesKeyWithoutDigest(t *testing.T) {
	srv := testserver.Etcd(t)
	ctx := context.Background()
	cli := client(t, srv.Endpoint)
	a, b := locker(t, srv.Endpoint), locker(t, srv.Endpoint)
	ls, err := a.TryAcquire(ctx, "old", dlock.WithOwner("old-owner"))
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	defer ls.Release(ctx)
	key, lease := head(t, cli, "old")
	before, err := cli.Get(ctx, key)
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	if v := string(before.Kvs[0].Value); !strings.HasPrefix(v, "old-owner\x00") || strings.Contains(v, ls.Token()) {
		t.Fatalf("key value %q: want the owner and a digest, never the token", v)
	}
	if _, err := cli.Put(ctx, key, "old-owner", clientv3.WithLease(lease)); err != nil {
		t.Fatalf("rewrite the value without its digest: %v", err)
	}
	adopted, err := b.Resume(ctx, ls.Handle())
	if err == nil {
		adopted.Release(ctx)
		t.Fatal("Resume of a key without a token digest succeeded")
	}
	if !errors.Is(err, dlock.ErrLost) {
		t.Fatalf("Resume of a key without a token digest = %v, want ErrLost", err)
	}
	after, err := cli.Get(ctx, key)
	if err != nil || len(after.Kvs) != 1 {
		t.Fatalf("the key after the refused Resume: %v, %d keys", err, len(after.Kvs))
	}
	if kv := after.Kvs[0]; string(kv.Value) != "old-owner" || clientv3.LeaseID(kv.Lease) != lease {
		t.Errorf("the refused Resume changed the key: value %q lease %x, want \"old-owner\" under %x", kv.Value, kv.Lease, lease)
	}
	h, ok, err := b.Inspect(ctx, "old")
	if err != nil || !ok || h.Owner != "old-owner" {
		t.Errorf("Inspect = %+v, %v, %v; want held by old-owner", h, ok, err)
	}
}
