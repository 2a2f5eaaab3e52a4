package etcdlock

import (
	"fmt"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/driver"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// MinTTL is the shortest lease this driver ever grants, whatever the
// election timeout: etcd 3.4 silently turns a lease TTL of 0, -1 or 1 s
// into 2 s (its minimum is 1.5 election timeouts, rounded up), so a
// shorter TTL is refused rather than trusted. The minimum a Locker
// enforces is usually higher: see MinTTLFor.
const MinTTL = 2 * time.Second

// DefaultElectionTimeout is the election timeout the driver assumes of the
// cluster unless told otherwise (Config.ElectionTimeout, the URL's
// election_timeout): etcd's default --election-timeout. A member's setting
// cannot be read over the client API.
const DefaultElectionTimeout = time.Second

// electionsPerTTL is how many election timeouts a TTL must span (MinTTLFor).
const electionsPerTTL = 8

// MinTTLFor is the shortest TTL that survives an ordinary leader election
// of a cluster with this election timeout: 8 election timeouts, rounded up
// to whole seconds, and at least MinTTL (8 s for etcd's default 1 s). It
// is also the length of a Locker's wait lease, under which waiters' keys
// wait whatever the lock's TTL: a waiter that dies gives up its place
// within it (see the package doc).
//
// Why 8: the watchdog refreshes a lease a third of its TTL after its last
// confirmed renewal, retries every TTL/12, and declares it lost when two
// thirds have passed without a confirmation, so refreshes have TTL/3 -
// TTL/12 = TTL/4 to get through. A leader killed mid-hold is replaced
// within two election timeouts (followers wait one election timeout
// without heartbeats, plus a random part of up to one more, then vote),
// during which no renewal is confirmed. TTL/4 >= 2 election timeouts gives
// TTL >= 8 election timeouts. Shorter TTLs lose healthy locks during an
// election: with 1 s, a 3 s TTL lost the lock in 3 of 5 trials.
func MinTTLFor(electionTimeout time.Duration) time.Duration {
	if electionTimeout <= 0 {
		electionTimeout = DefaultElectionTimeout
	}
	ttl := electionsPerTTL * electionTimeout
	if r := ttl % time.Second; r != 0 {
		ttl += time.Second - r
	}
	return max(ttl, MinTTL)
}

// Config says where a Locker's locks live in etcd and what the cluster's
// election timeout is. The zero value is the defaults (New's).
type Config struct {
	// Prefix is the etcd key prefix of the locks (URL key prefix; default
	// DefaultPrefix, also for ""). Lockers that should see each other's
	// locks must use the same one.
	Prefix string
	// ElectionTimeout is the cluster's --election-timeout (URL key
	// election_timeout; default DefaultElectionTimeout, also for 0); it
	// sets the minimum TTL (MinTTLFor). It cannot be read over the client
	// API: saying a shorter one than the cluster's allows TTLs that an
	// election can break.
	ElectionTimeout time.Duration
}

// New returns a Locker whose locks live in etcd under DefaultPrefix, reached
// through cli, on a cluster with the default election timeout: it is
// Config{}.Locker(cli, opts...). The Locker never closes cli. opts become
// its defaults; a TTL must be at least MinTTLFor(DefaultElectionTimeout),
// 8 s (the Locker rounds up to whole seconds).
func New(cli *clientv3.Client, opts ...dlock.Option) (*dlock.Locker, error) {
	return Config{}.Locker(cli, opts...)
}

// Locker returns a Locker on cli configured by c. The Locker never closes
// cli; opts become its defaults. A nil client or an invalid field is an
// error wrapping dlock.ErrInvalidArgument.
func (c Config) Locker(cli *clientv3.Client, opts ...dlock.Option) (*dlock.Locker, error) {
	d, err := c.Driver(cli)
	if err != nil {
		return nil, err
	}
	return dlock.NewLocker(d, opts...)
}

// Driver returns the bare driver on cli, for callers assembling their own
// Locker with dlock.NewLocker. Closing the driver leaves cli open.
func (c Config) Driver(cli *clientv3.Client) (driver.Driver, error) {
	return c.newDriver(cli, false)
}

// etcdDriver implements driver.Driver, Queuer, Notifier, Lister,
// ForceReleaser, EvictionWatcher, BatchRefresher, BatchReleaser,
// Describer, Ledger and Adopter on one etcd client.
type etcdDriver struct {
	cli    *clientv3.Client
	keys   keyspace
	closes bool // the client was built from a URL and is ours to close
	pool   *pool
	// election is the cluster's election timeout; minTTL follows from it.
	election, minTTL time.Duration
	// dialTimeout is the URL's dial_timeout; 0 on a caller's client.
	dialTimeout time.Duration
	// hook, set only by tests, runs after each step of an acquire
	// ("session", "put", "wait") and of a refresh ("refresh"), to inject
	// failures and races between steps.
	hook func(step string)
}

func (d *etcdDriver) step(name string) {
	if d.hook != nil {
		d.hook(name)
	}
}

// newDriver validates c and builds the driver; closes says whether cli
// is the driver's to close (opened from a URL).
func (c Config) newDriver(cli *clientv3.Client, closes bool) (*etcdDriver, error) {
	if cli == nil {
		return nil, fmt.Errorf("%w: nil *clientv3.Client", dlock.ErrInvalidArgument)
	}
	if c.ElectionTimeout < 0 {
		return nil, fmt.Errorf("%w: etcdlock.Config.ElectionTimeout %s: want the cluster's --election-timeout, or 0 for the default %s", dlock.ErrInvalidArgument, c.ElectionTimeout, DefaultElectionTimeout)
	}
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	if c.ElectionTimeout == 0 {
		c.ElectionTimeout = DefaultElectionTimeout
	}
	return &etcdDriver{
		cli: cli, keys: keyspace{prefix: c.Prefix}, closes: closes, pool: newPool(cli),
		election: c.ElectionTimeout, minTTL: MinTTLFor(c.ElectionTimeout),
	}, nil
}

// Capabilities reports etcd's whole-second leases of at least
// MinTTLFor(the election timeout).
func (d *etcdDriver) Capabilities() driver.Capabilities {
	return driver.Capabilities{MinTTL: d.minTTL, TTLGranularity: time.Second, MinTTLWhy: fmt.Sprintf(
		"8 election timeouts (%s): a shorter lease can expire while a new leader is elected and no renewal is confirmed; "+
			"a cluster with a shorter --election-timeout allows less: name it in the URL (?election_timeout=)", d.election)}
}

// Close revokes the driver's shared leases (deleting any key still under
// them; a key another driver adopted is under that driver's lease), waits for its background work, and closes the client when it was
// opened from a URL.
func (d *etcdDriver) Close() error {
	d.pool.close()
	if d.closes {
		return d.cli.Close()
	}
	return nil
}

// leaseSeconds validates ttl as an etcd lease length.
func (d *etcdDriver) leaseSeconds(ttl time.Duration) (int64, error) {
	if ttl < d.minTTL || ttl%time.Second != 0 {
		return 0, fmt.Errorf("%w: ttl %s: etcd leases are whole seconds, at least %s for an election timeout of %s", dlock.ErrInvalidArgument, ttl, d.minTTL, d.election)
	}
	return int64(ttl / time.Second), nil
}

// Compile-time checks of the optional interfaces.
var (
	_ driver.Queuer          = (*etcdDriver)(nil)
	_ driver.Lister          = (*etcdDriver)(nil)
	_ driver.ForceReleaser   = (*etcdDriver)(nil)
	_ driver.Describer       = (*etcdDriver)(nil)
	_ driver.BatchRefresher  = (*etcdDriver)(nil)
	_ driver.BatchReleaser   = (*etcdDriver)(nil)
	_ driver.EvictionWatcher = (*etcdDriver)(nil)
	_ driver.Ledger          = (*etcdDriver)(nil)
)

// cleanupTimeout bounds a best-effort clean-up in the background (deleting
// an abandoned key, revoking an idle lease).
const cleanupTimeout = 2 * time.Second
