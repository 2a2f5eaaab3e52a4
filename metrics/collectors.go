package metrics

import (
	"errors"
	"fmt"

	"github.com/dlockdev/dlock"
	"github.com/prometheus/client_golang/prometheus"
)

// collectors are a registry's Locker metrics, shared by every Locker
// instrumented on it.
type collectors struct {
	wait, hold    *prometheus.HistogramVec
	held, waiters *prometheus.GaugeVec
	lost, renew   *prometheus.CounterVec
}

func newCollectors(c config) *collectors {
	return &collectors{
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "dlock_acquire_wait_seconds",
			Help:    "How long dlock acquire calls took, by outcome: acquired, held (not granted in time), canceled, error.",
			Buckets: c.waitBuckets,
		}, []string{"backend", "outcome"}),
		hold: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "dlock_hold_seconds",
			Help:    "How long dlock leases were held, from grant to end, by reason: released, or why the lease was lost.",
			Buckets: c.holdBuckets,
		}, []string{"backend", "reason"}),
		held: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "dlock_held",
			Help: "dlock leases held now by this process.",
		}, []string{"backend"}),
		waiters: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "dlock_waiters",
			Help: "dlock acquire calls in progress now in this process.",
		}, []string{"backend"}),
		lost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dlock_lost_total",
			Help: "dlock leases lost (ended without their holder releasing them), by reason.",
		}, []string{"backend", "reason"}),
		renew: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dlock_renew_total",
			Help: "dlock lease refreshes (watchdog or Lease.Refresh), by result: ok, lost, error.",
		}, []string{"backend", "result"}),
	}
}

func newFenceCounter() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dlock_fence_rejected_total",
		Help: "Writes refused by a dlock fence guard because a newer lock grant had written, by store.",
	}, []string{"store"})
}

// takeAll registers c's collectors with r, or takes the equal ones an
// earlier Instrument registered there.
func (c *collectors) takeAll(r *registrar) {
	take(r, &c.wait)
	take(r, &c.hold)
	take(r, &c.held)
	take(r, &c.waiters)
	take(r, &c.lost)
	take(r, &c.renew)
}

// registrar registers collectors until one fails.
type registrar struct {
	reg   prometheus.Registerer
	added []prometheus.Collector
	err   error
}

// take registers *c, or replaces *c with the equal collector already
// registered; it reports whether *c is newly registered.
func take[C prometheus.Collector](r *registrar, c *C) (added bool) {
	if r.err != nil {
		return false
	}
	err := r.reg.Register(*c)
	if err == nil {
		r.added = append(r.added, *c)
		return true
	}
	var are prometheus.AlreadyRegisteredError
	if !errors.As(err, &are) {
		r.err = fmt.Errorf("%w: metrics: %w", dlock.ErrInvalidArgument, err)
		return false
	}
	existing, ok := are.ExistingCollector.(C)
	if !ok {
		r.err = fmt.Errorf("%w: metrics: the registry holds a %T where a %T was expected: %w", dlock.ErrInvalidArgument, are.ExistingCollector, *c, err)
		return false
	}
	*c = existing
	return false
}

// done returns the first error, after unregistering what was registered
// before it.
func (r *registrar) done() error {
	if r.err != nil {
		for _, c := range r.added {
			r.reg.Unregister(c)
		}
	}
	return r.err
}
