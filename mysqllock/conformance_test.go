package mysqllock_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/dlocktest"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	"github.com/dlockdev/dlock/mysqllock"
)

// TestConformanceLease runs the suite on a pool with go-sql-driver/mysql's
// defaults: each statement on its own, parameters prepared. It skips what
// takes no path of its own there: child processes open the URL, whose
// pool batches as in TestConformanceLeaseBatched, and refreshes, the
// ledger and adoption send the same single statements on either pool.
func TestConformanceLease(t *testing.T) {
	d := newDB(t)
	h := leaseHarness(d, func(t testing.TB) *dlock.Locker { return d.locker(t, mysqllock.Config{}) })
	const byURL = "its child processes open the URL, whose pool batches: TestConformanceLeaseBatched runs it"
	const same = "the same single statements on either pool: TestConformanceLeaseBatched runs it"
	h.Skip = map[string]string{
		"ExclusionProcesses": byURL, "AcquireAllProcesses": byURL, "AdoptFromKilledProcess": byURL,
		"SemaphoreCrash": byURL, "ElectionCrash": byURL,
		"RunOnce": same + " (the ledger)", "Watchdog": same + " (refreshes)", "ManualRefresh": same + " (refreshes)",
		"LossServerStopped": same + " (refreshes)", "AdoptSurvivesGrantor": same + " (adoption)", "AdoptDetach": same + " (adoption)",
	}
	dlocktest.Run(t, h)
}

// TestConformanceLeaseBatched runs the suite on a pool that sends several
// statements in one message, as dlock.Open makes it.
func TestConformanceLeaseBatched(t *testing.T) {
	d := newDB(t)
	pool := openSQL(t, d.srv.DSN(d.name)+"?interpolateParams=true&multiStatements=true")
	pool.SetMaxIdleConns(100)
	dlocktest.Run(t, leaseHarness(d, func(t testing.TB) *dlock.Locker {
		l, err := mysqllock.New(pool)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		return l
	}))
}

// leaseHarness is the suite's harness for lease mode on d, whose Lockers
// newLocker opens.
func leaseHarness(d *db, newLocker func(testing.TB) *dlock.Locker) dlocktest.Harness {
	return dlocktest.Harness{
		New: newLocker,
		URL: d.url,
		TTL: suiteTTL,
		Expire: func(t testing.TB, name string) {
			d.exec(t, `UPDATE dlock_leases SET expires_at = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND
				WHERE name = ? AND token IS NOT NULL`, name)
		},
		Steal: func(t testing.TB, name string) {
			// A foreign holder granted as the driver grants: the row's next fence.
			d.exec(t, `UPDATE dlock_leases SET token = 'thief', owner = 'thief', fence = fence + 1,
				expires_at = UTC_TIMESTAMP(6) + INTERVAL 1 HOUR WHERE name = ?`, name)
		},
		NewStoppable: func(t testing.TB) (*dlock.Locker, func()) {
			return stoppable(t, mysqllock.Config{})
		},
		Provides: []dlocktest.Capability{dlocktest.Queuer, dlocktest.BatchRefresher, dlocktest.BatchReleaser,
			dlocktest.Lister, dlocktest.ForceReleaser, dlocktest.Migrator,
			dlocktest.MigrationReporter, dlocktest.SettingsReporter, dlocktest.Adopter, dlocktest.Ledger,
			dlocktest.Diagnoser},
		Lacks: map[dlocktest.Capability]string{
			dlocktest.Notifier:        "waiters wait in the server, in GET_LOCK on the name's wake key (Queuer)",
			dlocktest.EvictionWatcher: "MySQL has no channel to push a force-release on: the evicted holder learns at its next refresh",
			dlocktest.SessionWatcher:  "a lease is a row with a TTL, not a session",
			dlocktest.Describer:       "the portable TTL limits apply as they are",
			dlocktest.LogSetter:       "the driver logs nothing",
		},
	}
}

// stoppable opens a Locker on a server of its own, which the suite stops.
func stoppable(t testing.TB, cfg mysqllock.Config) (*dlock.Locker, func()) {
	srv := testserver.NewMariaDB(t)
	d := onServer(t, srv)
	return d.locker(t, cfg), srv.Kill
}

func TestConformanceGetLock(t *testing.T) {
	// The run ledger is the same tables and code in both modes, and lease
	// mode runs the cross-process skew test on it; here two
	// slots check the wiring (make slots sets its own count).
	if os.Getenv(dlocktest.EnvSlots) == "" {
		t.Setenv(dlocktest.EnvSlots, "2")
	}
	d := newDB(t)
	cfg := mysqllock.Config{Mode: mysqllock.GetLock}
	dlocktest.Run(t, dlocktest.Harness{
		New:          func(t testing.TB) *dlock.Locker { return d.locker(t, cfg) },
		URL:          d.url + "?mode=get_lock",
		Expire:       func(t testing.TB, name string) { d.killHolder(t, name) },
		SessionBound: true,
		TTL:          suiteTTL,
		NewStoppable: func(t testing.TB) (*dlock.Locker, func()) {
			return stoppable(t, cfg)
		},
		Provides: []dlocktest.Capability{dlocktest.Queuer, dlocktest.Lister, dlocktest.ForceReleaser,
			dlocktest.SessionWatcher, dlocktest.Migrator, dlocktest.MigrationReporter, dlocktest.Describer,
			dlocktest.SettingsReporter, dlocktest.Ledger, dlocktest.Diagnoser},
		Lacks: map[dlocktest.Capability]string{
			dlocktest.Notifier:        "waiters wait in the server, in GET_LOCK (Queuer)",
			dlocktest.BatchRefresher:  "a session lock needs no refresh: each lease's check is its connection's health",
			dlocktest.BatchReleaser:   "each lock is released on its own pinned connection",
			dlocktest.EvictionWatcher: "a force-release kills the holder's connection, which the session monitor sees",
			dlocktest.LogSetter:       "the driver logs nothing",
			dlocktest.Adopter:         "a GET_LOCK lock is held by the connection that took it: no other connection can take it over",
		},
	})
}

// killHolder kills the connection holding name's GET_LOCK.
func (d *db) killHolder(t testing.TB, name string) {
	t.Helper()
	var id int64
	if err := d.sql.QueryRowContext(ctx(t), "SELECT IS_USED_LOCK(?)", mysqllock.Key(name)).Scan(&id); err != nil {
		t.Fatalf("holder of %q: %v", name, err)
	}
	d.exec(t, fmt.Sprintf("KILL CONNECTION %d", id))
}
