package mysqllock

import (
	"context"
	"fmt"
	"time"

	"github.com/dlockdev/dlock/driver"
)

// SweepOld runs a lease-mode driver's sweep with the given age.
func SweepOld(ctx context.Context, drv driver.Driver, age time.Duration) error {
	d, ok := drv.(*leases)
	if !ok {
		return fmt.Errorf("SweepOld: %T is not the lease-mode driver", drv)
	}
	return d.sweepOld(ctx, age)
}

// UseMySQLGrant makes a driver send the grant it sends to MySQL 8
// servers (which MariaDB runs as well): in get_lock mode, the fence from
// the counter row rather than the sequence.
func UseMySQLGrant(drv driver.Driver) {
	switch d := drv.(type) {
	case *leases:
		d.flavor.Store(flavorMySQL)
	case *getLocks:
		d.flavor.Store(flavorMySQL)
	}
}

// MonitorEvery is how often get_lock mode's monitor checks the held locks.
const MonitorEvery = monitorEvery
