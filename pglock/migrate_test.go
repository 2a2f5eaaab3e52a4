package pglock_test

import (
	"slices"
	"testing"

	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	"github.com/dlockdev/dlock/pglock"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TestMigrateReport checks, on a fresh database, that each mode's
// migration lists the objects it created, and nothing the second time.
func TestMigrateReport(t *testing.T) {
	url := testserver.Postgres(t).NewDatabase(t)
	pool := newPool(t, url)
	for _, tc := range []struct {
		name string
		cfg  pglock.Config
		want []string
	}{
		{"lease", pglock.Config{}, []string{"sequence dlock_leases_seq", "table dlock_leases",
			"table dlock_leases_runs", "table dlock_leases_ledgers"}},
		{"advisory", pglock.Config{Mode: pglock.Advisory}, []string{"sequence dlock_fences_seq", "table dlock_fences_holders",
			"table dlock_fences_runs", "table dlock_fences_ledgers"}},
		{"schema", pglock.Config{Table: "locks.leases"}, []string{"sequence locks.leases_seq", "table locks.leases",
			"table locks.leases_runs", "table locks.leases_ledgers"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.cfg.Table == "locks.leases" {
				if _, err := pool.Exec(ctx(t), "CREATE SCHEMA locks"); err != nil {
					t.Fatal(err)
				}
			}
			mr := reporter(t, pool, tc.cfg)
			created, err := mr.MigrateReport(ctx(t))
			if err != nil || !slices.Equal(created, tc.want) {
				t.Fatalf("first MigrateReport = %q, %v; want %q", created, err, tc.want)
			}
			created, err = mr.MigrateReport(ctx(t))
			if err != nil || len(created) != 0 {
				t.Fatalf("second MigrateReport = %q, %v; want nothing created", created, err)
			}
		})
	}
}

// TestMigrateReportUpgrade checks that upgrading a lease table of an
// earlier version reports the columns and the tables it added.
func TestMigrateReportUpgrade(t *testing.T) {
	pool := newPool(t, testserver.Postgres(t).NewDatabase(t))
	if _, err := pool.Exec(ctx(t), `CREATE TABLE dlock_leases (name text PRIMARY KEY, token text,
		owner text NOT NULL DEFAULT '', fence bigint NOT NULL, expires_at timestamptz)`); err != nil {
		t.Fatal(err)
	}
	created, err := reporter(t, pool, pglock.Config{}).MigrateReport(ctx(t))
	want := []string{"sequence dlock_leases_seq", "column dlock_leases.dead", "column dlock_leases.waiters", "column dlock_leases.reserved",
		"table dlock_leases_runs", "table dlock_leases_ledgers"}
	if err != nil || !slices.Equal(created, want) {
		t.Fatalf("MigrateReport on an old table = %q, %v; want %q", created, err, want)
	}
}

// reporter returns cfg's bare driver on pool as a MigrationReporter.
func reporter(t *testing.T, pool *pgxpool.Pool, cfg pglock.Config) driver.MigrationReporter {
	t.Helper()
	drv, err := cfg.Driver(pool)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = drv.Close() })
	mr, ok := drv.(driver.MigrationReporter)
	if !ok {
		t.Fatalf("%T does not implement driver.MigrationReporter", drv)
	}
	return mr
}
