package redislock_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/internal/testserver"
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

	one := locker(t, c, redislock.WithReplicaSync(1))
	defer one.Close()
	ls, err := one.TryAcquire(ctx, "replica/ok", dlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatalf("WithReplicaSync(1) with one replica: %v", err)
	}
	if v, err := client(t, replica.Addr).Get(ctx, keys.Lock("replica/ok")).Result(); err != nil || !strings.HasPrefix(v, ls.Token()) {
		t.Errorf("replica has %q, %v right after the grant; want the lease's token", v, err)
	}
	_ = ls.Release(ctx)

	two := locker(t, c, redislock.WithReplicaSync(2), redislock.WithReplicaTimeout(100*time.Millisecond))
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
	if n, err := c.Exists(ctx, keys.Lock(name)).Result(); err != nil || n != 0 {
		t.Errorf("lock key exists = %d, %v after an unsynced grant; want released", n, err)
	}
}
