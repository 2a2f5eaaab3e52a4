package redlock

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/driver"
	"github.com/redis/go-redis/v9"
)

// Scheme is the URL scheme this package registers with dlock.Open.
const Scheme = "redlock"

func init() { dlock.Register(Scheme, open) }

// DefaultNodeTimeout bounds each node's answer to one request when
// Config.NodeTimeout is 0. The Redis page suggests 5–50 ms for a 10 s TTL:
// a node slower than this counts as failed for that request, so a slow or
// dead node never adds more than this to an acquire.
const DefaultNodeTimeout = 50 * time.Millisecond

// Config tunes the Redlock driver. The zero value is the defaults (New's):
// DefaultNodeTimeout and quorum fencing on.
type Config struct {
	// NodeTimeout is how long one request waits for each node (URL key
	// node_timeout; default DefaultNodeTimeout, also for 0; negative is
	// an invalid argument). Keep it far below the TTL: the time an
	// acquire takes is subtracted from the lease's validity. A node
	// timeout at or above the TTL is clamped to the validity window.
	//
	// The timeout is enforced by the driver whatever the client's
	// settings; clients built by dlock.Open also set
	// ContextTimeoutEnabled so that the abandoned request itself stops at
	// the timeout. For your own clients, set ContextTimeoutEnabled too, or
	// a late request lingers in the background until the client's
	// ReadTimeout.
	NodeTimeout time.Duration
	// NoFencing turns quorum fencing off (URL key fencing=false; default
	// false: fencing on). With fencing on, every grant carries a fence
	// that strictly increases across grants even when nodes fail (see the
	// package doc, # Fencing tokens); that costs a second round trip
	// whenever the nodes' counters disagree. With it off, an acquire is
	// always one round trip and Lease.Fence is 0: for efficiency locks
	// only.
	NoFencing bool
}

// New returns a Locker running Redlock over the given independent Redis
// nodes, one client per node, with the default Config: it is
// Config{}.Locker(clients, opts...). The number of clients must be odd
// and at least 3; a nil client or the same node twice is an invalid
// argument. The clients stay the caller's: Locker.Close does not close
// them. opts become the Locker's defaults.
func New(clients []redis.UniversalClient, opts ...dlock.Option) (*dlock.Locker, error) {
	return Config{}.Locker(clients, opts...)
}

// Locker returns a Locker running Redlock over clients, configured by c;
// opts become its defaults. The clients stay the caller's. Invalid
// clients or an invalid field of c is an error wrapping
// dlock.ErrInvalidArgument.
func (c Config) Locker(clients []redis.UniversalClient, opts ...dlock.Option) (*dlock.Locker, error) {
	d, err := c.Driver(clients)
	if err != nil {
		return nil, err
	}
	return dlock.NewLocker(d, opts...)
}

// Driver returns the bare driver over clients, for callers assembling
// their own Locker with dlock.NewLocker. Closing the driver leaves the
// clients open.
func (c Config) Driver(clients []redis.UniversalClient) (driver.Driver, error) {
	cfg, err := c.resolve()
	if err != nil {
		return nil, err
	}
	return newDriver(clients, cfg)
}

// config is a validated Config with its defaults filled in.
type config struct {
	nodeTimeout time.Duration
	fencing     bool
}

func (c Config) resolve() (config, error) {
	if c.NodeTimeout < 0 {
		return config{}, fmt.Errorf("%w: redlock.Config.NodeTimeout %s: want a positive duration far below the TTL, or 0 for the default %s",
			dlock.ErrInvalidArgument, c.NodeTimeout, DefaultNodeTimeout)
	}
	cfg := config{nodeTimeout: c.NodeTimeout, fencing: !c.NoFencing}
	if cfg.nodeTimeout == 0 {
		cfg.nodeTimeout = DefaultNodeTimeout
	}
	return cfg, nil
}

// node is one independent Redis server.
type node struct {
	client redis.UniversalClient
	addr   string // for errors; never holds a password
	// cluster: the node is a Redis Cluster, with a fence counter per
	// hash slot (rediscore.Keys.Counter).
	cluster bool
}

// redlock is the driver. Requests to the nodes run in goroutines of their
// own; a request returns as soon as its outcome is decided, and the
// stragglers finish in the background (bg), bounded by the node timeout.
type redlock struct {
	nodes  []node
	byAddr []int // node indexes ordered by address (gate.go)
	quorum int
	cfg    config
	hub    *hub
	owned  bool // the clients were built by Open: Close closes them
	// tls and ctxTimeout are the URL's tls and context_timeout_enabled.
	tls, ctxTimeout bool
	bg              sync.WaitGroup
	once            sync.Once

	mu   sync.Mutex
	live map[string]*attempt // granted attempts with requests in flight, by token

	attempts atomic.Uint64 // numbers every acquire attempt, see acquire.lua
	slotNs   atomic.Int64  // recent attempt duration, see split.go
	phase2s  atomic.Int64  // grants that needed phase 2 (for the benchmarks)
}

func newDriver(clients []redis.UniversalClient, cfg config) (*redlock, error) {
	if err := validClients(clients); err != nil {
		return nil, err
	}
	d := &redlock{quorum: len(clients)/2 + 1, cfg: cfg, live: map[string]*attempt{}}
	for i, c := range clients {
		_, cluster := c.(*redis.ClusterClient)
		d.nodes = append(d.nodes, node{client: c, addr: addrOf(c, i), cluster: cluster})
	}
	d.byAddr = sortByAddr(d.nodes)
	d.hub = newHub(d)
	return d, nil
}

// validClients checks for an odd count of at least 3 distinct nodes.
func validClients(clients []redis.UniversalClient) error {
	n := len(clients)
	if n < 3 || n%2 == 0 {
		return invalid("%d clients: Redlock needs an odd number of independent nodes, at least 3", n)
	}
	seen := map[string]int{}
	for i, c := range clients {
		if c == nil {
			return invalid("clients[%d] is nil", i)
		}
		for j := range i {
			if clients[j] == c {
				return invalid("clients[%d] and clients[%d] are the same client", j, i)
			}
		}
		if a, ok := identity(c); ok {
			if j, dup := seen[a]; dup {
				return invalid("clients[%d] and clients[%d] are the same node %s", j, i, a)
			}
			seen[a] = i
		}
	}
	return nil
}

// identity names the server a single-node client talks to (address and
// database), when the client type says.
func identity(c redis.UniversalClient) (string, bool) {
	if rc, ok := c.(*redis.Client); ok {
		o := rc.Options()
		return fmt.Sprintf("%s/%d", o.Addr, o.DB), true
	}
	return "", false
}

func addrOf(c redis.UniversalClient, i int) string {
	if rc, ok := c.(*redis.Client); ok {
		return rc.Options().Addr
	}
	return fmt.Sprintf("node %d", i)
}

// Close stops the release subscriptions, waits for every request still in
// flight and, for a driver opened from a URL, closes its clients.
func (d *redlock) Close() error {
	var errs []error
	d.once.Do(func() {
		d.hub.close()
		d.bg.Wait()
		if d.owned {
			for _, n := range d.nodes {
				errs = append(errs, n.client.Close())
			}
		}
	})
	return errors.Join(errs...)
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: redlock: "+format, append([]any{dlock.ErrInvalidArgument}, args...)...)
}

var _ interface {
	driver.Driver
	driver.Notifier
} = (*redlock)(nil)
