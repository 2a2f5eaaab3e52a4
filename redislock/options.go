package redislock

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/internal/redisscript"
)

// DefaultReplicaTimeout bounds WAIT when WithReplicaSync is on and
// WithReplicaTimeout is not given.
const DefaultReplicaTimeout = time.Second

// Option configures the Redis driver (New, or Open's query keys).
type Option func(*config)

type config struct {
	prefix         string
	replicas       int
	replicaTimeout time.Duration
	fair           bool
	logger         *slog.Logger
	defaults       []dlock.Option
	err            error
}

func defaultConfig() config {
	return config{prefix: redisscript.DefaultPrefix, replicaTimeout: DefaultReplicaTimeout, logger: slog.Default(), fair: true}
}

func (c *config) fail(err error) {
	if c.err == nil {
		c.err = err
	}
}

// WithPrefix sets the prefix of every key and channel (default "dlock:").
// Lockers that should exclude each other must use the same prefix. The URL
// query key is prefix.
func WithPrefix(prefix string) Option {
	return func(c *config) {
		if len(prefix) > 64 {
			c.fail(fmt.Errorf("%w: key prefix %.16q... is longer than 64 bytes", dlock.ErrInvalidArgument, prefix))
			return
		}
		c.prefix = prefix
	}
}

// WithReplicaSync makes a grant count only once WAIT confirms that n
// replicas have it (default 0: off). A grant that reaches fewer replicas
// within the replica timeout is released and reported as an error, so a
// failover to a replica cannot forget a lock it never received. It costs a
// second round trip per grant. Needs a *redis.Client or *redis.ClusterClient.
// The URL query key is replica_sync.
func WithReplicaSync(n int) Option {
	return func(c *config) {
		if n < 0 || n > 64 {
			c.fail(fmt.Errorf("%w: replica sync count %d out of range [0, 64]", dlock.ErrInvalidArgument, n))
			return
		}
		c.replicas = n
	}
}

// WithReplicaTimeout bounds the WAIT of WithReplicaSync (default
// DefaultReplicaTimeout). The URL query key is replica_timeout.
func WithReplicaTimeout(d time.Duration) Option {
	return func(c *config) {
		if d < time.Millisecond || d > time.Minute {
			c.fail(fmt.Errorf("%w: replica timeout %s out of range [1ms, 1m]", dlock.ErrInvalidArgument, d))
			return
		}
		c.replicaTimeout = d
	}
}

// WithLogger sets where the driver's one-time warnings go (default
// slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return func(c *config) {
		if l != nil {
			c.logger = l
		}
	}
}

// WithDefaults passes options to dlock.NewLocker: they become the
// Locker's defaults for every acquire (TTL, wait, owner, ...).
func WithDefaults(opts ...dlock.Option) Option {
	return func(c *config) { c.defaults = append(c.defaults, opts...) }
}

// WithFairQueue makes Acquire wait in a first-come first-served queue kept
// in Redis (default on). Under contention each release then wakes only
// the waiter at the head of the queue, instead of every waiter racing for
// the lock: handoffs cost one attempt and no waiter starves. A waiter that
// dies leaves the queue within a few seconds (it stops renewing its
// place), and the lock waits for it meanwhile. Lockers without it still
// respect the queue: they take a free lock only when nobody is queued, and
// are not woken while waiters queue (they poll), so give every Locker that
// contends for a name the same setting. The URL query key is fair.
//
// With it off (fair=false), each release wakes the longest waiter of
// every Locker and they race: cheaper per waiter, but a waiter can lose
// many races in a row (see the contended benchmarks in the README).
func WithFairQueue(on bool) Option {
	return func(c *config) { c.fair = on }
}
