package metrics

import (
	"context"

	"github.com/dlockdev/dlock"
	"github.com/prometheus/client_golang/prometheus"
)

// lockerMetrics are the collectors with one Locker's backend label bound,
// so that a hook looks up at most one label value.
type lockerMetrics struct {
	wait, hold    prometheus.ObserverVec
	held, waiters prometheus.Gauge
	lost, renew   *prometheus.CounterVec
}

// lossReasons and refreshResults are the known label values; their series
// exist from the start, so that increase() sees the first event.
var (
	lossReasons    = []string{dlock.LostExpired, dlock.LostTakenOver, dlock.LostUnconfirmed, dlock.LostSession, dlock.LostForceReleased}
	refreshResults = []string{dlock.RefreshOK, dlock.RefreshLost, dlock.RefreshError}
)

func (c *collectors) forBackend(backend string) *lockerMetrics {
	b := prometheus.Labels{"backend": backend}
	m := &lockerMetrics{
		wait:    c.wait.MustCurryWith(b),
		hold:    c.hold.MustCurryWith(b),
		held:    c.held.With(b),
		waiters: c.waiters.With(b),
		lost:    c.lost.MustCurryWith(b),
		renew:   c.renew.MustCurryWith(b),
	}
	for _, r := range lossReasons {
		m.lost.WithLabelValues(r)
	}
	for _, r := range refreshResults {
		m.renew.WithLabelValues(r)
	}
	return m
}

// hooks update m. A lease counts in dlock_held from the AcquireDone that
// returns it to its Ended, which the Locker reports only after that
// AcquireDone, so the gauge never goes below zero.
func (m *lockerMetrics) hooks() dlock.Hooks {
	return dlock.Hooks{
		Acquiring: func(ctx context.Context, _ dlock.AcquireInfo) context.Context {
			m.waiters.Inc()
			return nil
		},
		AcquireDone: func(_ context.Context, ev dlock.AcquireEvent) {
			m.waiters.Dec()
			m.wait.WithLabelValues(ev.Outcome).Observe(ev.Waited.Seconds())
			if ev.Lease != nil {
				m.held.Inc()
			}
		},
		Refreshed: func(ev dlock.RefreshEvent) {
			m.renew.WithLabelValues(ev.Result).Inc()
		},
		Ended: func(ev dlock.EndEvent) {
			m.held.Dec()
			m.hold.WithLabelValues(ev.Reason).Observe(ev.Held.Seconds())
			if ev.Reason != dlock.EndReleased {
				m.lost.WithLabelValues(ev.Reason).Inc()
			}
		},
	}
}
