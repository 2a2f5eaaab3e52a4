// Package dlockotel traces dlock's locks with OpenTelemetry, and records
// their metrics. It is a module of its own, so that dlock itself does not
// depend on OpenTelemetry:
//
//	go get github.com/dlockdev/dlock/dlockotel
//
// Instrument a Locker once, after opening it:
//
//	locker, err := dlock.Open(ctx, url)
//	...
//	if err := dlockotel.Instrument(locker); err != nil { ... }
//	if err := dlockotel.InstrumentMetrics(locker); err != nil { ... }
//
// # Spans
//
// Every acquire call (Acquire, TryAcquire, each name of AcquireAll, a
// Semaphore's Acquire, an RWMutex's Lock and RLock, an Election's
// Campaign) makes one span, a child of the call's context, named
// "dlock.lock KIND" (mutex, permit, read, write, leader). The lock's name
// is an attribute, not part of the span name, which must stay of low
// cardinality. A call that is not granted ends its span at once; a granted
// one keeps it open while the lease is held and ends it when the lease
// ends, so the span covers wait and hold:
//
//	attributes  dlock.backend  URL scheme (redis, postgres, mem, file, ...)
//	            dlock.name     the lock's name
//	            dlock.kind     mutex, permit, read, write, leader
//	            dlock.wait_ms  the call's wait bound (0: one try, -1: none)
//	            dlock.outcome  acquired, held, canceled or error
//	            dlock.waited_ms  how long the call took
//	            dlock.fence    the grant's fencing token
//	            dlock.lost.reason  why the lease was lost (dlock.LostExpired, ...)
//	events      acquired (dlock.fence, dlock.waited_ms)
//	            refreshed, or refresh failed (dlock.refresh.result, error.message)
//	            released (dlock.held_ms), or lost (dlock.lost.reason, dlock.held_ms)
//	status      Error for outcome error and for a lost lease; otherwise unset
//
// The lease's token (the secret that releases it) and its owner are never
// recorded. A span of a lost lease ends just after its Done channel closes:
// the Locker reports the end after waking the lease's waiters.
//
// # The work under the lock
//
// ContextWithLease makes the lock's span the parent of the work's spans:
//
//	lease, err := locker.Acquire(ctx, "reports/daily")
//	...
//	defer lease.Release(context.Background())
//	ctx = dlockotel.ContextWithLease(lease.Context(ctx), lease)
//	work(ctx) // canceled when the lease is lost; its spans nest under the lock's
//
// # Metrics
//
// InstrumentMetrics records the acquire calls' durations, the leases held,
// how long they were held and their refreshes; its doc lists the
// instruments. Neither the lock's name nor its owner is an attribute.
package dlockotel
