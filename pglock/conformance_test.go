package pglock_test

import (
	"os"
	"testing"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/dlocktest"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	"github.com/dlockdev/dlock/pglock"
)

func TestConformanceLease(t *testing.T) {
	d := newDB(t)
	dlocktest.Run(t, dlocktest.Harness{
		New: func(t testing.TB) *dlock.Locker { return d.locker(t, pglock.Config{}) },
		URL: d.url,
		TTL: suiteTTL,
		Expire: func(t testing.TB, name string) {
			d.exec(t, `UPDATE dlock_leases SET expires_at = clock_timestamp() - interval '1 second'
				WHERE name = $1 AND token IS NOT NULL`, name)
		},
		Steal: func(t testing.TB, name string) {
			d.exec(t, `UPDATE dlock_leases SET token = 'thief', owner = 'thief', fence = nextval('dlock_leases_seq'),
				expires_at = clock_timestamp() + interval '1 hour' WHERE name = $1`, name)
		},
		NewStoppable: func(t testing.TB) (*dlock.Locker, func()) {
			return stoppable(t, pglock.Config{})
		},
		Provides: []dlocktest.Capability{dlocktest.Queuer, dlocktest.BatchRefresher, dlocktest.BatchReleaser,
			dlocktest.Lister, dlocktest.ForceReleaser, dlocktest.EvictionWatcher, dlocktest.Migrator,
			dlocktest.MigrationReporter, dlocktest.Diagnoser, dlocktest.SettingsReporter, dlocktest.Ledger,
			dlocktest.Adopter},
		Lacks: map[dlocktest.Capability]string{
			dlocktest.Notifier:       "waiters queue in the table and the release NOTIFYs the head alone (Queuer)",
			dlocktest.SessionWatcher: "a lease is a row with a TTL, not a session",
			dlocktest.Describer:      "the portable TTL limits apply as they are",
			dlocktest.LogSetter:      "warnings go to the logger in the Open context",
		},
	})
}

func TestConformanceAdvisory(t *testing.T) {
	// The run ledger is the same tables and code in both modes, and lease
	// mode runs the cross-process skew test on it; here two slots check
	// the wiring (make slots sets its own count).
	if os.Getenv(dlocktest.EnvSlots) == "" {
		t.Setenv(dlocktest.EnvSlots, "2")
	}
	d := newDB(t)
	cfg := pglock.Config{Mode: pglock.Advisory}
	dlocktest.Run(t, dlocktest.Harness{
		New:          func(t testing.TB) *dlock.Locker { return d.locker(t, cfg) },
		URL:          d.url + "&mode=advisory&pool_max_conns=20",
		Expire:       func(t testing.TB, name string) { d.terminateHolder(t, name) },
		SessionBound: true,
		TTL:          suiteTTL,
		NewStoppable: func(t testing.TB) (*dlock.Locker, func()) {
			return stoppable(t, cfg)
		},
		Provides: []dlocktest.Capability{dlocktest.Queuer, dlocktest.BatchReleaser, dlocktest.Lister,
			dlocktest.ForceReleaser, dlocktest.EvictionWatcher, dlocktest.SessionWatcher, dlocktest.Migrator,
			dlocktest.MigrationReporter, dlocktest.Diagnoser, dlocktest.Describer, dlocktest.SettingsReporter,
			dlocktest.Ledger},
		Lacks: map[dlocktest.Capability]string{
			dlocktest.Notifier:       "waiters wait in the server, in pg_advisory_lock (Queuer)",
			dlocktest.BatchRefresher: "a session lock needs no refresh: each lease's check is its connection's health",
			dlocktest.LogSetter:      "warnings go to the logger in the Open context",
			dlocktest.Adopter:        "a lock is held by the session of the connection that took it: no other connection can take it over",
		},
	})
}

// stoppable opens a Locker on a server of its own, which the suite stops.
func stoppable(t testing.TB, cfg pglock.Config) (*dlock.Locker, func()) {
	srv := testserver.NewPostgres(t)
	admin := newPool(t, srv.URL())
	migrate(t, admin, cfg)
	l, err := cfg.Locker(newPool(t, srv.URL()))
	if err != nil {
		t.Fatal(err)
	}
	return l, srv.Stop
}

// terminateHolder ends the backend holding name's advisory lock, waiting
// until it has exited.
func (d *db) terminateHolder(t testing.TB, name string) {
	t.Helper()
	hi, lo := halves(pglock.Key(name))
	n := d.exec(t, `SELECT pg_terminate_backend(pid, 10000) FROM pg_locks
		WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
		AND classid = $1::bigint::oid AND objid = $2::bigint::oid AND objsubid = 1 AND granted`, hi, lo)
	if n != 1 {
		t.Fatalf("terminated %d backends holding %q, want 1", n, name)
	}
}

func halves(key int64) (hi, lo int64) {
	u := uint64(key)
	return int64(u >> 32), int64(u & 0xffffffff)
}
