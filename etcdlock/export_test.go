package etcdlock

import "github.com/dlockdev/dlock/driver"

// SetStepHook makes drv (an etcd driver) call hook after each step of an
// acquire: "session" (the shared lease is in hand), "put" (TryAcquire's
// transaction answered), "wait" (AcquireWait is queued behind someone),
// "delete" (before a background delete of a key given up on), and
// "refresh" (a refresh has read its keys and renewed their leases, and
// not yet judged the results). Set it before the driver is used.
func SetStepHook(drv driver.Driver, hook func(step string)) {
	d := drv.(*etcdDriver)
	d.hook, d.pool.hook = hook, hook
}

// WaitValue is the value of a queued waiter's key whose wait ends at
// lapse (see waitMark).
var WaitValue = waitValue

// LiveKeys is, over drv's sessions, the count of live keys the sessions
// keep and the count a walk over their keys finds.
func LiveKeys(drv driver.Driver) (kept, walked int) {
	p := drv.(*etcdDriver).pool
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.all {
		kept += s.nlive
		for _, at := range s.keys {
			if !at.IsZero() {
				walked++
			}
		}
	}
	return kept, walked
}
