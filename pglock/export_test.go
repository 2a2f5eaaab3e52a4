package pglock

import (
	"time"

	"github.com/dlockdev/dlock/driver"
)

// SetSleepHook makes a lease-mode driver tell hook each sleep of a queued
// waiter between its attempts, with the reservation it found behind (-1
// for none). Set it before the driver's first AcquireWait.
func SetSleepHook(drv driver.Driver, hook func(reserved, sleep time.Duration)) {
	drv.(*leases).sleepHook = hook
}

// BatchStatements returns a lease-mode driver's batch refresh and
// release statements and the channel its releases notify.
func BatchStatements(drv driver.Driver) (refresh, release, channel string) {
	d := drv.(*leases)
	return d.refreshBatch, d.releaseBatch, d.channel
}

// WakeChannel returns a lease-mode driver's own NOTIFY channel, on which
// the releases that wake its waiters are sent.
func WakeChannel(drv driver.Driver) string { return drv.(*leases).wake }

// SawContended makes a lease-mode driver take name as contended lately,
// as if one of its waits had queued on it: its releases of name hand the
// lock over.
func SawContended(drv driver.Driver, name string) { drv.(*leases).recent.Saw(name) }

// CoalescedWaiting is how many of a lease-mode driver's tries, waiters'
// attempts and releases wait to be sent together, behind the statements
// in flight.
func CoalescedWaiting(drv driver.Driver) int {
	d := drv.(*leases)
	return d.tries.Waiting() + d.turns.Waiting() + d.releases.Waiting()
}

// CoalesceSends is how many coalesced statements of each kind a driver
// keeps in flight.
const CoalesceSends = coalesceSends
