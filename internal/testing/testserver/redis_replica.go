package testserver

import (
	"context"
	"fmt"

	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisReplica starts a redis-server replicating primary (replicaof) and
// waits until the initial sync is done and the primary counts it, so that
// WAIT sees it. Extra args are added as for Redis.
func RedisReplica(t testing.TB, primary *RedisServer, args ...string) *RedisServer {
	t.Helper()
	host, port, _ := strings.Cut(primary.Addr, ":")
	r := Redis(t, append([]string{"--replicaof", host, port}, args...)...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := waitInfo(ctx, r.Addr, "master_link_status:up"); err != nil {
		t.Fatalf("RedisReplica: %v", err)
	}
	if err := waitInfo(ctx, primary.Addr, "connected_slaves:1"); err != nil {
		t.Fatalf("RedisReplica: %v", err)
	}
	return r
}

// Promote makes a replica a primary (REPLICAOF NO ONE), as a failover
// manager would.
func (s *RedisServer) Promote(ctx context.Context) error {
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer c.Close()
	return c.Do(ctx, "replicaof", "no", "one").Err()
}

func waitInfo(ctx context.Context, addr, want string) error {
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	for {
		info, err := c.Info(ctx, "replication").Result()
		if err == nil && strings.Contains(info, want) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s never reported %s (last: %v %q)", addr, want, err, info)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
