package pglock

import "github.com/dlockdev/dlock/driver"

// What each mode implements, checked by the compiler: a changed signature
// fails the build instead of dropping a mode back to polling or to
// dlock.ErrUnsupported (the conformance suite's harness declares the same).
var (
	_ driver.Queuer            = (*leases)(nil)
	_ driver.BatchRefresher    = (*leases)(nil)
	_ driver.BatchReleaser     = (*leases)(nil)
	_ driver.Lister            = (*leases)(nil)
	_ driver.ForceReleaser     = (*leases)(nil)
	_ driver.EvictionWatcher   = (*leases)(nil)
	_ driver.Migrator          = (*leases)(nil)
	_ driver.MigrationReporter = (*leases)(nil)
	_ driver.Diagnoser         = (*leases)(nil)
	_ driver.Ledger            = (*leases)(nil)

	_ driver.Queuer            = (*advisory)(nil)
	_ driver.BatchReleaser     = (*advisory)(nil)
	_ driver.Lister            = (*advisory)(nil)
	_ driver.ForceReleaser     = (*advisory)(nil)
	_ driver.EvictionWatcher   = (*advisory)(nil)
	_ driver.SessionWatcher    = (*advisory)(nil)
	_ driver.Migrator          = (*advisory)(nil)
	_ driver.MigrationReporter = (*advisory)(nil)
	_ driver.Diagnoser         = (*advisory)(nil)
	_ driver.Describer         = (*advisory)(nil)
	_ driver.Ledger            = (*advisory)(nil)
)
