package metrics

import (
	"fmt"
	"math"
	"slices"

	"github.com/dlockdev/dlock"
)

// Option configures Instrument.
type Option func(*config) error

type config struct {
	waitBuckets, holdBuckets []float64
}

// defaultWaitBuckets: sub-millisecond tries up to five-minute waits; 30 s
// is dlock's default acquire wait.
var defaultWaitBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// defaultHoldBuckets: a millisecond critical section up to a day-long
// leadership.
var defaultHoldBuckets = []float64{0.001, 0.01, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 1800, 3600, 14400, 86400}

// WithWaitBuckets sets the upper bounds, in seconds, of
// dlock_acquire_wait_seconds' buckets: positive and increasing. The
// default is 0.0005 0.001 0.0025 0.005 0.01 0.025 0.05 0.1 0.25 0.5 1 2.5
// 5 10 30 60 120 300. It applies when Instrument registers the histogram,
// that is on the registry's first Instrument.
func WithWaitBuckets(bounds ...float64) Option {
	return func(c *config) error {
		if err := validBuckets("WithWaitBuckets", bounds); err != nil {
			return err
		}
		c.waitBuckets = slices.Clone(bounds)
		return nil
	}
}

// WithHoldBuckets sets the upper bounds, in seconds, of
// dlock_hold_seconds' buckets: positive and increasing. The default is
// 0.001 0.01 0.1 0.5 1 5 10 30 60 300 900 1800 3600 14400 86400. It
// applies on the registry's first Instrument, as WithWaitBuckets.
func WithHoldBuckets(bounds ...float64) Option {
	return func(c *config) error {
		if err := validBuckets("WithHoldBuckets", bounds); err != nil {
			return err
		}
		c.holdBuckets = slices.Clone(bounds)
		return nil
	}
}

// validBuckets refuses what prometheus.NewHistogramVec would panic on, and
// bounds that cannot be durations.
func validBuckets(opt string, bounds []float64) error {
	if len(bounds) == 0 {
		return fmt.Errorf("%w: metrics.%s: no bucket bounds", dlock.ErrInvalidArgument, opt)
	}
	for i, b := range bounds {
		if math.IsNaN(b) || b <= 0 {
			return fmt.Errorf("%w: metrics.%s: bound %v is not a positive number of seconds", dlock.ErrInvalidArgument, opt, b)
		}
		if i > 0 && b <= bounds[i-1] {
			return fmt.Errorf("%w: metrics.%s: bound %v follows %v; bounds must increase", dlock.ErrInvalidArgument, opt, b, bounds[i-1])
		}
	}
	return nil
}

func newConfig(opts []Option) (config, error) {
	c := config{waitBuckets: defaultWaitBuckets, holdBuckets: defaultHoldBuckets}
	for _, o := range opts {
		if o == nil {
			return config{}, fmt.Errorf("%w: metrics: nil Option", dlock.ErrInvalidArgument)
		}
		if err := o(&c); err != nil {
			return config{}, err
		}
	}
	return c, nil
}
