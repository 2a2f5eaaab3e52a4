package redislock_test

import (
	"testing"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/dlocktest"
	"github.com/dlockdev/dlock/internal/testserver"
	"github.com/dlockdev/dlock/redislock"
	"github.com/redis/go-redis/v9"
)

// TestConformance runs the suite with the default settings (fair queue on).
func TestConformance(t *testing.T) {
	srv := testserver.Redis(t)
	admin := client(t, srv.Addr)
	dlocktest.Run(t, dlocktest.Harness{
		New:          func(t testing.TB) *dlock.Locker { return locker(t, client(t, srv.Addr)) },
		URL:          srv.URL(),
		Expire:       func(t testing.TB, name string) { expire(t, admin, name) },
		Steal:        func(t testing.TB, name string) { steal(t, admin, name) },
		NewStoppable: stoppable,
	})
}

// TestConformanceRacing runs the suite with the fair queue off: waiters
// are woken by pub/sub and race for the lock.
func TestConformanceRacing(t *testing.T) {
	srv := testserver.Redis(t)
	admin := client(t, srv.Addr)
	racing := redislock.Config{NoFairQueue: true}
	dlocktest.Run(t, dlocktest.Harness{
		New:    func(t testing.TB) *dlock.Locker { return lockerWith(t, client(t, srv.Addr), racing) },
		URL:    srv.URL() + "?fair=false",
		Expire: func(t testing.TB, name string) { expire(t, admin, name) },
		Steal:  func(t testing.TB, name string) { steal(t, admin, name) },
		NewStoppable: func(t testing.TB) (*dlock.Locker, func()) {
			srv := testserver.Redis(t)
			return lockerWith(t, client(t, srv.Addr), racing), srv.Stop
		},
	})
}

func TestConformanceCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster conformance is not short")
	}
	c := testserver.RedisCluster(t, 3)
	admin := client(t, c.Addrs...)
	dlocktest.Run(t, dlocktest.Harness{
		New:    func(t testing.TB) *dlock.Locker { return locker(t, client(t, c.Addrs...)) },
		URL:    c.URL(),
		Expire: func(t testing.TB, name string) { expire(t, admin, name) },
		Steal:  func(t testing.TB, name string) { steal(t, admin, name) },
		NewStoppable: func(t testing.TB) (*dlock.Locker, func()) {
			one := testserver.RedisCluster(t, 1)
			cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: one.Addrs})
			t.Cleanup(func() { _ = cc.Close() })
			return locker(t, cc), one.Nodes[0].Stop
		},
	})
}
