// Package metrics exports a dlock Locker's activity, and the fence guards'
// rejections, as Prometheus metrics:
//
//	reg := prometheus.NewRegistry()
//	if err := metrics.Instrument(locker, reg); err != nil { ... }
//	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
//
// Instrument adds dlock.Hooks to the Locker; the hooks only update
// in-memory collectors (a label lookup and an atomic add per event). For
// `dlock serve`, the registry's handler is what serve.Config.Metrics takes.
//
// # Metrics
//
//	dlock_acquire_wait_seconds  histogram  backend, outcome  how long an acquire call took
//	dlock_hold_seconds          histogram  backend, reason   how long a lease was held, at its end
//	dlock_held                  gauge      backend           leases held now
//	dlock_waiters               gauge      backend           acquire calls in progress now
//	dlock_lost_total            counter    backend, reason   leases lost
//	dlock_renew_total           counter    backend, result   lease refreshes
//	dlock_fence_rejected_total  counter    store             stale writes refused by fence guards
//
// backend is the Locker's Backend (the URL scheme: redis, postgres, etcd,
// mem, ...); outcome is dlock.AcquireEvent.Outcome (acquired, held,
// canceled, error); reason is dlock.EndEvent.Reason (released, or a loss
// reason such as expired); result is dlock.RefreshEvent.Result (ok, lost,
// error); store is memory, postgres, redis or sqlite. No metric has the
// lock's name as a label: names are unbounded (one per job, per tenant,
// per row), and a label per name would grow the series without limit.
// Per-name state is what Locker.List and `dlock serve`'s dashboard show.
//
// # Buckets
//
// dlock_acquire_wait_seconds spans an uncontended try on a local backend
// (well under a millisecond) to a long wait (minutes):
//
//	0.0005 0.001 0.0025 0.005 0.01 0.025 0.05 0.1 0.25 0.5 1 2.5 5 10 30 60 120 300
//
// dlock_hold_seconds spans a short critical section to a day-long
// leadership:
//
//	0.001 0.01 0.1 0.5 1 5 10 30 60 300 900 1800 3600 14400 86400
//
// WithWaitBuckets and WithHoldBuckets replace them.
//
// # Sharing a registry
//
// Every Locker instrumented on one registry shares its collectors (series
// add up per backend), and the fence counter is hooked once per registry.
// The first Instrument on a registry decides the buckets. Instrument each
// Locker once per registry: a second call adds its hooks again and counts
// every event twice.
//
// See docs/metrics.md for PromQL examples.
package metrics
