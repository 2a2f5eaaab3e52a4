package redlock

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/driver"
	"github.com/redis/go-redis/v9"
)

// Scheme is the URL scheme this package registers with dlock.Open.
const Scheme = "redlock"

func init() { dlock.Register(Scheme, open) }

// New returns a Locker running Redlock over the given independent Redis
// nodes, one client per node. The number of clients must be odd and at
// least 3; a nil client or the same node twice is an invalid argument.
// The clients stay the caller's: Locker.Close does not close them.
func New(clients []redis.UniversalClient, opts ...Option) (*dlock.Locker, error) {
	cfg := defaultConfig().with(opts)
	if cfg.err != nil {
		return nil, cfg.err
	}
	d, err := newDriver(clients, cfg)
	if err != nil {
		return nil, err
	}
	return dlock.NewLocker(d, cfg.defaults...)
}

// node is one independent Redis server.
type node struct {
	client redis.UniversalClient
	addr   string // for errors; never holds a password
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
	bg     sync.WaitGroup
	once   sync.Once

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
		d.nodes = append(d.nodes, node{client: c, addr: addrOf(c, i)})
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
