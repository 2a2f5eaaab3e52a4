package filelock_test

import (
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/dlocktest"
	_ "github.com/dlockdev/dlock/filelock" // registers file://
)

func TestConformance(t *testing.T) {
	path := filepath.Join(t.TempDir(), "conformance", "dlock.db")
	dlocktest.Run(t, dlocktest.Harness{
		New: func(t testing.TB) *dlock.Locker { return open(t, path) },
		URL: "file://" + path,
		// SQLite here is C translated to Go: under -race on a loaded
		// 2-core CI machine one statement can take milliseconds, and a
		// grant delayed past a third of a 500 ms TTL is born lost. A 1 s
		// TTL keeps the timing margins of the suite's default meaningful.
		TTL: time.Second,
		Expire: func(t testing.TB, name string) {
			sqlExec(t, path, `UPDATE dlock_leases SET expires_at = 0 WHERE name = ?1`, name)
		},
		Steal: func(t testing.TB, name string) {
			sqlExec(t, path, `UPDATE dlock_leases SET token = 'stolen', owner = 'thief', fence = fence + 1, expires_at = expires_at + 60000 WHERE name = ?1`, name)
		},
		Provides: []dlocktest.Capability{dlocktest.Notifier, dlocktest.BatchRefresher, dlocktest.Lister,
			dlocktest.ForceReleaser, dlocktest.EvictionWatcher, dlocktest.Diagnoser, dlocktest.SettingsReporter,
			dlocktest.Ledger, dlocktest.Adopter},
		Lacks: map[dlocktest.Capability]string{
			dlocktest.Queuer:            "waiters are woken by the file watcher and race (Notifier)",
			dlocktest.BatchReleaser:     "a release is one local statement: nothing to save by batching",
			dlocktest.SessionWatcher:    "a lease is a row with a TTL, not a session",
			dlocktest.Migrator:          "the table is created at open",
			dlocktest.MigrationReporter: "the table is created at open",
			dlocktest.Describer:         "the portable TTL limits apply as they are",
			dlocktest.LogSetter:         "it logs nothing",
		},
	})
}

// sqlExec runs one statement on the lock database from outside any Locker,
// as another program on the host would.
func sqlExec(t testing.TB, path, query string, args ...any) {
	t.Helper()
	db, err := sql.Open("sqlite", "file://"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	res, err := db.Exec(query, args...)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("%s on %v: %d rows, want 1", query, args, n)
	}
}
