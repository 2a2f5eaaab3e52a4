package dlockotel

import (
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Option configures Instrument and InstrumentMetrics.
type Option func(*config)

type config struct {
	tracerProvider trace.TracerProvider
	meterProvider  metric.MeterProvider
	attrs          []attribute.KeyValue
	err            error
}

// WithTracerProvider sets the TracerProvider the spans come from. The
// default is the global one, otel.GetTracerProvider(). InstrumentMetrics
// ignores it.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) {
		if tp == nil {
			c.err = errors.Join(c.err, errors.New("dlockotel: WithTracerProvider(nil): want a TracerProvider"))
		}
		c.tracerProvider = tp
	}
}

// WithMeterProvider sets the MeterProvider the instruments come from. The
// default is the global one, otel.GetMeterProvider(). Instrument ignores
// it.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) {
		if mp == nil {
			c.err = errors.Join(c.err, errors.New("dlockotel: WithMeterProvider(nil): want a MeterProvider"))
		}
		c.meterProvider = mp
	}
}

// WithAttributes adds attributes to every span (Instrument) or every
// measurement (InstrumentMetrics), such as the service's own labels. Keep
// them few and of low cardinality for metrics; never put a lease's token
// in one.
func WithAttributes(attrs ...attribute.KeyValue) Option {
	return func(c *config) { c.attrs = append(c.attrs, attrs...) }
}

func newConfig(opts []Option) (config, error) {
	var c config
	for _, o := range opts {
		if o == nil {
			c.err = errors.Join(c.err, errors.New("dlockotel: nil Option"))
			continue
		}
		o(&c)
	}
	return c, c.err
}
