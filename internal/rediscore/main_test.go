package rediscore_test

import (
	"testing"

	"github.com/dlockdev/dlock/internal/testing/testserver"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

// TestMain fails the binary if any goroutine outlived its test: a Mux
// must stop its goroutines on Close.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// server starts a redis-server and returns it with a client on it, both
// closed when t ends.
func server(t *testing.T) (*testserver.RedisServer, *redis.Client) {
	t.Helper()
	s := testserver.Redis(t)
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	t.Cleanup(func() { _ = c.Close() })
	return s, c
}
