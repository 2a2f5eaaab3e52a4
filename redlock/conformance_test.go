package redlock

import (
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/dlocktest"
)

// The suite runs on a loaded machine: its node timeout and TTL are
// generous so that a busy scheduler is not mistaken for a failed node.
const (
	suiteTTL         = 2 * time.Second
	suiteNodeTimeout = 300 * time.Millisecond
)

func TestConformance(t *testing.T) {
	ns := startNodes(t, 5)
	dlocktest.Run(t, dlocktest.Harness{
		New: func(t testing.TB) *dlock.Locker {
			return ns.locker(t, Config{NodeTimeout: suiteNodeTimeout})
		},
		URL:    ns.url("node_timeout=300ms"),
		TTL:    suiteTTL,
		Expire: func(t testing.TB, name string) { ns.expire(t, name) },
		Steal:  ns.steal,
		NewStoppable: func(t testing.TB) (*dlock.Locker, func()) {
			other := startNodes(t, 3)
			l := other.locker(t, Config{NodeTimeout: suiteNodeTimeout})
			return l, func() {
				for _, s := range other.srv {
					s.Kill()
				}
			}
		},
		Provides: []dlocktest.Capability{dlocktest.Notifier, dlocktest.BatchRefresher, dlocktest.Lister,
			dlocktest.ForceReleaser, dlocktest.SettingsReporter, dlocktest.LogSetter, dlocktest.Ledger, dlocktest.Adopter},
		Lacks: map[dlocktest.Capability]string{
			dlocktest.Queuer:            "no node decides a queue for the majority: waiters are woken by pub/sub and race",
			dlocktest.BatchReleaser:     "a release is sent to every node at once, one call per node",
			dlocktest.EvictionWatcher:   "a force-release reaches the holder at its next refresh",
			dlocktest.SessionWatcher:    "a lease is keys with a TTL on the nodes, not a session",
			dlocktest.Migrator:          "no schema",
			dlocktest.MigrationReporter: "no schema",
			dlocktest.Diagnoser:         "dlock doctor's Redis checks apply to each node (redis://)",
			dlocktest.Describer:         "the portable TTL limits apply as they are",
		},
	})
}

func TestConformanceWithoutFencing(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	ns := startNodes(t, 3)
	l := ns.locker(t, Config{NoFencing: true, NodeTimeout: suiteNodeTimeout})
	ls, err := l.Acquire(t.Context(), "nofence", dlock.WithTTL(suiteTTL))
	if err != nil {
		t.Fatal(err)
	}
	if ls.Fence() != 0 {
		t.Errorf("Fence() = %d with fencing off, want 0", ls.Fence())
	}
	if err := ls.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}
