package zklock

import "github.com/dlockdev/dlock/driver"

// What the driver implements, checked by the compiler: a changed
// signature fails the build instead of dropping it back to polling or to
// dlock.ErrUnsupported (the conformance suite's harness declares the same).
var (
	_ driver.Queuer           = (*zkDriver)(nil)
	_ driver.Notifier         = (*zkDriver)(nil)
	_ driver.Lister           = (*zkDriver)(nil)
	_ driver.ForceReleaser    = (*zkDriver)(nil)
	_ driver.Describer        = (*zkDriver)(nil)
	_ driver.Diagnoser        = (*zkDriver)(nil)
	_ driver.SettingsReporter = (*zkDriver)(nil)
	_ driver.LogSetter        = (*zkDriver)(nil)
	_ driver.Ledger           = (*zkDriver)(nil)
)
