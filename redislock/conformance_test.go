package redislock_test

import (
	"os"
	"testing"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/dlocktest"
	"github.com/dlockdev/dlock/internal/testing/testserver"
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
		Provides:     provides(dlocktest.Queuer),
		Lacks:        lacks(),
	})
}

// TestConformanceRacing runs the suite with the fair queue off: waiters
// are woken by pub/sub and race for the lock.
func TestConformanceRacing(t *testing.T) {
	// The run ledger is the same keys and code as in TestConformance,
	// which runs the cross-process skew test on it; here two slots check
	// RunOnce under these settings (make slots sets its own count).
	if os.Getenv(dlocktest.EnvSlots) == "" {
		t.Setenv(dlocktest.EnvSlots, "2")
	}
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
		Provides: provides(),
		Lacks:    lacks(dlocktest.Queuer),
		Skip:     racingSkips(),
	})
}

// racingSkips are the behaviours that neither wait nor release into a
// queue, so take the same path with the fair queue on or off:
// TestConformance runs them.
func racingSkips() map[string]string {
	const why = "the same scripts with the fair queue on or off: TestConformance runs it"
	skip := map[string]string{}
	for _, name := range []string{"Watchdog", "ManualRefresh", "LossExpired", "LossTakenOver", "LossServerStopped",
		"AdoptSurvivesGrantor", "AdoptDetach", "AdoptRefused", "AdoptFromKilledProcess"} {
		skip[name] = why
	}
	return skip
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
		Provides: provides(dlocktest.Queuer),
		Lacks:    lacks(),
	})
}

// provides is what the Redis driver implements, plus extra (the fair
// queue's Queuer, unless fair=false).
func provides(extra ...dlocktest.Capability) []dlocktest.Capability {
	return append([]dlocktest.Capability{dlocktest.Notifier, dlocktest.BatchRefresher, dlocktest.BatchReleaser,
		dlocktest.Lister, dlocktest.ForceReleaser, dlocktest.EvictionWatcher, dlocktest.Diagnoser,
		dlocktest.SettingsReporter, dlocktest.LogSetter, dlocktest.Ledger, dlocktest.Adopter}, extra...)
}

// lacks is what the Redis driver does not implement, and why, plus extra.
func lacks(extra ...dlocktest.Capability) map[dlocktest.Capability]string {
	m := map[dlocktest.Capability]string{
		dlocktest.SessionWatcher:    "leases live in Redis keys with a TTL, not in a client session",
		dlocktest.Migrator:          "no schema: keys are created as they are used",
		dlocktest.MigrationReporter: "no schema",
		dlocktest.Describer:         "the portable TTL limits apply as they are",
	}
	for _, c := range extra {
		m[c] = "fair=false: waiters are woken by pub/sub and race, in no queue"
	}
	return m
}
