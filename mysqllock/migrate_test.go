package mysqllock_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/internal/testing/testserver"
)

// TestMissingSchema: without Migrate, an acquire fails at once (not after
// its wait) with an error that names the fix; Migrate then reports the
// tables it created, and a second Migrate none.
func TestMissingSchema(t *testing.T) {
	srv := testserver.MariaDB(t)
	name := srv.NewDatabase(t)
	for _, mode := range []string{"lease", "get_lock"} {
		l, err := dlock.Open(ctx(t), srv.URL(name)+"?mode="+mode)
		if err != nil {
			t.Fatal(err)
		}
		_, err = l.Acquire(ctx(t), "job", dlock.WithWait(dlock.Forever))
		if !errors.Is(err, driver.ErrPermanent) || !strings.Contains(err.Error(), "run 'dlock migrate --url mysql://dlock@") {
			t.Errorf("%s mode without schema: %v, want a permanent error naming dlock migrate", mode, err)
		}
		_ = l.Close()
	}
	l, err := dlock.Open(ctx(t), srv.URL(name))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	created, err := l.Driver().(driver.MigrationReporter).MigrateReport(ctx(t))
	want := []string{"table dlock_leases_fences", "table dlock_leases", "table dlock_leases_holders",
		"table dlock_leases_runs", "table dlock_leases_ledgers", "sequence dlock_leases_seq"}
	if err != nil || !slices.Equal(created, want) {
		t.Fatalf("MigrateReport: %q, %v; want %q", created, err, want)
	}
	if created, err := l.Driver().(driver.MigrationReporter).MigrateReport(ctx(t)); err != nil || len(created) != 0 {
		t.Fatalf("second MigrateReport: %q, %v; want nothing", created, err)
	}
	lease, err := l.TryAcquire(ctx(t), "job")
	if err != nil {
		t.Fatalf("after Migrate: %v", err)
	}
	_ = lease.Release(ctx(t))
}
