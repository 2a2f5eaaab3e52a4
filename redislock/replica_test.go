package redislock_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	"github.com/dlockdev/dlock/redislock"
	"github.com/redis/go-redis/v9"
)

// primaryWithReplica starts a primary and one replica of it, and waits
// until the replica is in sync.
func primaryWithReplica(t *testing.T) (*testserver.RedisServer, *testserver.RedisServer) {
	t.Helper()
	primary := testserver.Redis(t)
	replica := testserver.Redis(t, "--replicaof", "127.0.0.1", strconv.Itoa(primary.Port))
	rc := client(t, replica.Addr)
	deadline := time.Now().Add(20 * time.Second)
	for {
		info, _ := rc.Info(ctxT(t), "replication").Result()
		if strings.Contains(info, "master_link_status:up") {
			return primary, replica
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica never synced: %s", info)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestReplicaSync(t *testing.T) {
	primary, replica := primaryWithReplica(t)
	c := client(t, primary.Addr)
	ctx := ctxT(t)

	one := lockerWith(t, c, redislock.Config{ReplicaSync: 1})
	defer one.Close()
	ls, err := one.TryAcquire(ctx, "replica/ok", dlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatalf("ReplicaSync 1 with one replica: %v", err)
	}
	if v, err := client(t, replica.Addr).Get(ctx, keys.Lock("replica/ok")).Result(); err != nil || !strings.HasPrefix(v, ls.Token()) {
		t.Errorf("replica has %q, %v right after the grant; want the lease's token", v, err)
	}
	_ = ls.Release(ctx)

	two := lockerWith(t, c, redislock.Config{ReplicaSync: 2, ReplicaTimeout: 100 * time.Millisecond})
	defer two.Close()
	expectUnsynced(t, two, c, "replica/two")

	replica.Pause()
	defer replica.Resume()
	expectUnsynced(t, one, c, "replica/paused")
}

// expectUnsynced checks that a grant short of replicas is an error and is
// released on the primary.
func expectUnsynced(t *testing.T, l *dlock.Locker, c redis.UniversalClient, name string) {
	t.Helper()
	ctx := ctxT(t)
	_, err := l.TryAcquire(ctx, name, dlock.WithTTL(time.Minute))
	if err == nil || !errors.Is(err, dlock.ErrBackend) || !strings.Contains(err.Error(), "replicas") {
		t.Fatalf("TryAcquire short of replicas = %v, want a backend error naming the replicas", err)
	}
	t.Logf("short of replicas: %v", err)
	// The grant is undone in the background (the call returns by its
	// deadline): it is gone a round trip later.
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		n, err := c.Exists(ctx, keys.Lock(name)).Result()
		if err == nil && n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lock key exists = %d, %v 2s after an unsynced grant; want released", n, err)
		}
	}
}

// TestReplicaSyncRefresh: under WithReplicaSync a refresh (single or
// batched) counts only once the replica confirmed it; with the replica
// paused it is an error that is not "not held", and the watchdog then
// declares the lease lost rather than keeping a promise it cannot keep.
func TestReplicaSyncRefresh(t *testing.T) {
	primary, replica := primaryWithReplica(t)
	c := client(t, primary.Addr)
	ctx := ctxT(t)
	l := lockerWith(t, c, redislock.Config{ReplicaSync: 1, ReplicaTimeout: 500 * time.Millisecond})
	defer l.Close()
	ls, err := l.TryAcquire(ctx, "replica/refresh", dlock.WithTTL(3*time.Second), dlock.WithAutoRefresh(false))
	if err != nil {
		t.Fatal(err)
	}
	if err := ls.Refresh(ctx, 3*time.Second); err != nil {
		t.Fatalf("Refresh with the replica up: %v", err)
	}
	replica.Pause()
	defer replica.Resume()
	err = ls.Refresh(ctx, 3*time.Second)
	if err == nil || errors.Is(err, dlock.ErrNotAcquired) || !strings.Contains(err.Error(), "replicas") {
		t.Fatalf("Refresh with the replica paused = %v, want an error naming the replicas", err)
	}
	t.Logf("unconfirmed refresh: %v", err)

	// With the watchdog on, unconfirmed refreshes end the lease before its
	// TTL runs out on the primary.
	expectUnsynced(t, l, c, "replica/watchdog")
	replica.Resume()
	auto, err := l.TryAcquire(ctx, "replica/watchdog", dlock.WithTTL(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	replica.Pause()
	select {
	case <-auto.Done():
		if left := time.Until(auto.Expires()); left < -100*time.Millisecond {
			t.Errorf("lease declared lost %s after its expiry", -left)
		}
		t.Logf("watchdog: %v", auto.Err())
	case <-time.After(5 * time.Second):
		t.Fatal("the lease stayed alive on refreshes no replica confirmed")
	}
	replica.Resume()
	_ = ls.Release(ctx)
}

// TestReleaseAfterLateRefresh: a refresh that lands late (after the
// holder gave the lease up) extends the key; Release with that token
// still deletes it, so the lock is not kept by nobody.
func TestReleaseAfterLateRefresh(t *testing.T) {
	srv := testserver.Redis(t)
	c := client(t, srv.Addr)
	ctx := ctxT(t)
	l := locker(t, c)
	defer l.Close()
	ls, err := l.TryAcquire(ctx, "late/refresh", dlock.WithTTL(time.Second), dlock.WithAutoRefresh(false))
	if err != nil {
		t.Fatal(err)
	}
	if err := ls.Refresh(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := ls.Release(ctx); err != nil {
		t.Fatalf("Release after a refresh: %v", err)
	}
	if n := c.Exists(ctx, keys.Lock("late/refresh")).Val(); n != 0 {
		t.Error("the refreshed key outlived the release")
	}
}
