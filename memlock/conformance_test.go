package memlock_test

import (
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/dlocktest"
	"github.com/dlockdev/dlock/memlock"
)

func newLocker(t testing.TB, s *memlock.Store) *dlock.Locker {
	t.Helper()
	l, err := memlock.New(s)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestConformance runs the suite in-process; cross-process tests skip
// (URL ""), since a child process cannot see this process's Store.
func TestConformance(t *testing.T) {
	store := memlock.NewStore()
	dlocktest.Run(t, dlocktest.Harness{
		New:    func(t testing.TB) *dlock.Locker { return newLocker(t, store) },
		Expire: func(t testing.TB, name string) { store.Expire(name) },
		Steal: func(t testing.TB, name string) {
			store.Steal(name, "dlocktest-thief", time.Hour)
		},
		NewStoppable: func(t testing.TB) (*dlock.Locker, func()) {
			s := memlock.NewStore()
			return newLocker(t, s), s.Stop
		},
		Provides: []dlocktest.Capability{dlocktest.Notifier, dlocktest.BatchRefresher, dlocktest.Lister,
			dlocktest.ForceReleaser, dlocktest.EvictionWatcher, dlocktest.Ledger, dlocktest.Adopter},
		Lacks: map[dlocktest.Capability]string{
			dlocktest.Queuer:            "waiters are woken by Notifier; an in-process map has no queue to keep",
			dlocktest.BatchReleaser:     "a release is a map operation: nothing to batch",
			dlocktest.SessionWatcher:    "leases live in the Store, not in a session",
			dlocktest.Migrator:          "no schema",
			dlocktest.MigrationReporter: "no schema",
			dlocktest.Diagnoser:         "nothing to diagnose in process memory",
			dlocktest.Describer:         "the portable TTL limits apply as they are",
			dlocktest.SettingsReporter:  "a mem:// URL has no settings",
			dlocktest.LogSetter:         "it logs nothing",
		},
	})
}
