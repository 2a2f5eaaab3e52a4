package redlock

import "github.com/dlockdev/dlock/driver"

// What the driver implements, checked by the compiler: a changed
// signature fails the build instead of dropping it back to polling or to
// dlock.ErrUnsupported (the conformance suite's harness declares the same).
var (
	_ driver.Notifier      = (*redlock)(nil)
	_ driver.ForceReleaser = (*redlock)(nil)
	_ driver.LogSetter     = (*redlock)(nil)
)
