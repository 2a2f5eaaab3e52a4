package mysqllock

import "github.com/dlockdev/dlock/driver"

// getLocks is the get_lock-mode driver.
type getLocks struct {
	*leases
}

func newGetLocks(b base) driver.Driver { return &getLocks{leases: newLeases(b)} }
