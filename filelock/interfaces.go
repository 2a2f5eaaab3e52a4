package filelock

import "github.com/dlockdev/dlock/driver"

// What the driver implements, checked by the compiler: a changed
// signature fails the build instead of dropping it back to polling or to
// dlock.ErrUnsupported (the conformance suite's harness declares the same).
var (
	_ driver.Notifier        = (*fileDriver)(nil)
	_ driver.BatchRefresher  = (*fileDriver)(nil)
	_ driver.Lister          = (*fileDriver)(nil)
	_ driver.ForceReleaser   = (*fileDriver)(nil)
	_ driver.EvictionWatcher = (*fileDriver)(nil)
	_ driver.Adopter         = (*fileDriver)(nil)
)
