package redislock_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/internal/rediscore"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	"github.com/dlockdev/dlock/redislock"
	"github.com/redis/go-redis/v9"
)

var keys = rediscore.Keys{Prefix: rediscore.DefaultPrefix}

// stealScript makes a foreign token hold a lock, with a fresh fence.
var stealScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local f = string.format('%.0f', math.max(now, (tonumber(redis.call('GET', KEYS[2]) or '0') or 0) + 1))
redis.call('SET', KEYS[2], f)
redis.call('SET', KEYS[1], 'stolen-token\n' .. f .. '\nthief', 'PX', ARGV[1])
return f`)

// client returns a go-redis client on addrs (a Cluster client for more
// than one address), closed when t ends.
func client(t testing.TB, addrs ...string) redis.UniversalClient {
	t.Helper()
	var c redis.UniversalClient
	if len(addrs) == 1 {
		c = redis.NewClient(&redis.Options{Addr: addrs[0]})
	} else {
		c = redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// locker opens a Locker with the default Config on its own client; the
// caller closes it.
func locker(t testing.TB, c redis.UniversalClient) *dlock.Locker {
	t.Helper()
	return lockerWith(t, c, redislock.Config{})
}

// lockerWith opens a Locker configured by cfg (its warnings discarded
// unless cfg has a Logger) on its own client; the caller closes it.
func lockerWith(t testing.TB, c redis.UniversalClient, cfg redislock.Config) *dlock.Locker {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	l, err := cfg.Locker(c)
	if err != nil {
		t.Fatalf("redislock.Config.Locker: %v", err)
	}
	return l
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func expire(t testing.TB, c redis.UniversalClient, name string) {
	t.Helper()
	if err := c.Del(ctxT(t), keys.Lock(name)).Err(); err != nil {
		t.Fatalf("expire %q: %v", name, err)
	}
}

func steal(t testing.TB, c redis.UniversalClient, name string) {
	t.Helper()
	err := stealScript.Run(ctxT(t), c, []string{keys.Lock(name), keys.Counter(name, isCluster(c))}, 60000).Err()
	if err != nil {
		t.Fatalf("steal %q: %v", name, err)
	}
}

// stoppable opens a Locker on a fresh server that the caller may stop.
func stoppable(t testing.TB) (*dlock.Locker, func()) {
	srv := testserver.Redis(t)
	return locker(t, client(t, srv.Addr)), srv.Stop
}

func isCluster(c redis.UniversalClient) bool {
	_, ok := c.(*redis.ClusterClient)
	return ok
}

// acquireLater acquires name on l in a goroutine, waiting up to 30 s with
// a TTL of a minute, and sends the lease (nil when it failed, the error
// reported) on the channel it returns.
func acquireLater(t testing.TB, ctx context.Context, l *dlock.Locker, name string) <-chan *dlock.Lease {
	got := make(chan *dlock.Lease, 1)
	go func() {
		ls, err := l.Acquire(ctx, name, dlock.WithTTL(time.Minute), dlock.WithWait(30*time.Second))
		if err != nil {
			t.Error(err)
		}
		got <- ls
	}()
	return got
}
