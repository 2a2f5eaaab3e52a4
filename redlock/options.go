package redlock

import (
	"fmt"
	"time"

	"github.com/dlockdev/dlock"
)

// DefaultNodeTimeout bounds each node's answer to one request when
// WithNodeTimeout is not given. The Redis page suggests 5–50 ms for a 10 s
// TTL: a node slower than this counts as failed for that request, so a
// slow or dead node never adds more than this to an acquire.
const DefaultNodeTimeout = 50 * time.Millisecond

// Option configures the Redlock driver (New). Locker defaults such as the
// TTL go through WithDefaults.
type Option func(*config)

type config struct {
	nodeTimeout time.Duration
	fencing     bool
	defaults    []dlock.Option
	err         error
}

func defaultConfig() config {
	return config{nodeTimeout: DefaultNodeTimeout, fencing: true}
}

func (c config) with(opts []Option) config {
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	return c
}

// WithNodeTimeout sets how long one request waits for each node
// (default DefaultNodeTimeout; positive). Keep it far below the TTL: the
// time an acquire takes is subtracted from the lease's validity. A node
// timeout at or above the TTL is clamped to the validity window.
//
// The timeout is enforced by the driver whatever the client's settings;
// clients built by Open also set ContextTimeoutEnabled so that the
// abandoned request itself stops at the timeout. For your own clients,
// set ContextTimeoutEnabled too, or a late request lingers in the
// background until the client's ReadTimeout.
func WithNodeTimeout(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.fail(fmt.Errorf("%w: node timeout %s is not positive", dlock.ErrInvalidArgument, d))
			return
		}
		c.nodeTimeout = d
	}
}

// WithFencing turns quorum fencing on or off (default on). With it on,
// every grant carries a fence that strictly increases across grants even
// when nodes fail (see the package doc, # Fencing tokens); that costs a
// second round trip whenever the nodes' counters disagree. With it off,
// an acquire is always one round trip and Lease.Fence is 0: for
// efficiency locks only.
func WithFencing(on bool) Option {
	return func(c *config) { c.fencing = on }
}

// WithDefaults passes options to the Locker New returns, as its defaults
// for every acquire (dlock.WithTTL, dlock.WithWait, dlock.WithOwner...).
func WithDefaults(opts ...dlock.Option) Option {
	return func(c *config) { c.defaults = append(c.defaults, opts...) }
}

func (c *config) fail(err error) {
	if c.err == nil {
		c.err = err
	}
}
