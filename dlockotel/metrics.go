package dlockotel

import (
	"context"
	"errors"

	"github.com/dlockdev/dlock"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// InstrumentMetrics makes l record OpenTelemetry metrics of its locks:
//
//	dlock.acquire.duration  histogram, s   dlock.backend, dlock.kind, dlock.outcome
//	dlock.leases.held       up-down, {lease}  dlock.backend, dlock.kind
//	dlock.lease.duration    histogram, s   dlock.backend, dlock.kind, dlock.end.reason
//	dlock.lease.refreshes   counter, {refresh}  dlock.backend, dlock.kind, dlock.refresh.result
//
// dlock.end.reason is "released" or the loss's reason (dlock.LostExpired,
// ...). The lock name is never an attribute: one series per name grows
// without bound. Like Instrument, it adds dlock.Hooks to l; it fails only
// on a nil Locker, a bad Option, or an instrument the Meter refuses.
func InstrumentMetrics(l *dlock.Locker, opts ...Option) error {
	if l == nil {
		return errors.New("dlockotel: InstrumentMetrics(nil): want a *dlock.Locker")
	}
	c, err := newConfig(opts)
	if err != nil {
		return err
	}
	if c.meterProvider == nil {
		c.meterProvider = otel.GetMeterProvider()
	}
	m, err := newMetrics(c.meterProvider.Meter(scope), c.attrs)
	if err != nil {
		return err
	}
	l.AddHooks(dlock.Hooks{AcquireDone: m.acquireDone, Refreshed: m.refreshed, Ended: m.ended})
	return nil
}

// metrics holds InstrumentMetrics' instruments.
type metrics struct {
	attrs     []attribute.KeyValue
	acquire   metric.Float64Histogram
	held      metric.Int64UpDownCounter
	lease     metric.Float64Histogram
	refreshes metric.Int64Counter
}

func newMetrics(m metric.Meter, attrs []attribute.KeyValue) (*metrics, error) {
	acquire, err1 := m.Float64Histogram("dlock.acquire.duration", metric.WithUnit("s"),
		metric.WithDescription("How long acquire calls took, by outcome."))
	held, err2 := m.Int64UpDownCounter("dlock.leases.held", metric.WithUnit("{lease}"),
		metric.WithDescription("Leases held now."))
	lease, err3 := m.Float64Histogram("dlock.lease.duration", metric.WithUnit("s"),
		metric.WithDescription("How long leases were held, from grant to release or loss."))
	refreshes, err4 := m.Int64Counter("dlock.lease.refreshes", metric.WithUnit("{refresh}"),
		metric.WithDescription("Lease refreshes, by result."))
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return nil, err
	}
	return &metrics{attrs: attrs, acquire: acquire, held: held, lease: lease, refreshes: refreshes}, nil
}

// with returns the measurement options for the configured attributes
// plus kv.
func (m *metrics) with(kv ...attribute.KeyValue) metric.MeasurementOption {
	return metric.WithAttributes(append(m.attrs[:len(m.attrs):len(m.attrs)], kv...)...)
}

func (m *metrics) acquireDone(ctx context.Context, ev dlock.AcquireEvent) {
	kind := keyKind.String(string(ev.Kind))
	backend := keyBackend.String(ev.Backend)
	m.acquire.Record(ctx, ev.Waited.Seconds(), m.with(backend, kind, keyOutcome.String(ev.Outcome)))
	if ev.Lease != nil {
		m.held.Add(ctx, 1, m.with(backend, kind))
	}
}

func (m *metrics) refreshed(ev dlock.RefreshEvent) {
	m.refreshes.Add(context.Background(), 1, m.with(keyBackend.String(ev.Backend),
		keyKind.String(string(ev.Lease.Kind())), keyRefresh.String(ev.Result)))
}

func (m *metrics) ended(ev dlock.EndEvent) {
	ctx := context.Background()
	backend, kind := keyBackend.String(ev.Backend), keyKind.String(string(ev.Lease.Kind()))
	m.held.Add(ctx, -1, m.with(backend, kind))
	m.lease.Record(ctx, ev.Held.Seconds(), m.with(backend, kind, keyEndReason.String(ev.Reason)))
}
