package etcdlock

import (
	"fmt"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/driver"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Scheme is the URL scheme this package registers: etcd://host:port[,...].
const Scheme = "etcd"

// MinTTL is the shortest lease this driver grants. etcd 3.4 silently turns
// a lease TTL of 0, -1 or 1 s into 2 s (its minimum is 1.5 election
// timeouts, rounded up), so a shorter TTL is refused rather than trusted.
const MinTTL = 2 * time.Second

func init() { dlock.Register(Scheme, open) }

// New returns a Locker whose locks live in etcd under DefaultPrefix, reached
// through cli. The Locker never closes cli. opts become its defaults; a TTL
// must be whole seconds, at least MinTTL (the Locker rounds up to seconds).
func New(cli *clientv3.Client, opts ...dlock.Option) (*dlock.Locker, error) {
	return NewWithPrefix(cli, DefaultPrefix, opts...)
}

// NewWithPrefix is New with the locks under the etcd key prefix instead of
// DefaultPrefix. Lockers that should see each other's locks must use the
// same prefix.
func NewWithPrefix(cli *clientv3.Client, prefix string, opts ...dlock.Option) (*dlock.Locker, error) {
	d, err := newDriver(cli, prefix, false)
	if err != nil {
		return nil, err
	}
	return dlock.NewLocker(d, opts...)
}

// etcdDriver implements driver.Driver, Queuer, Lister, ForceReleaser and
// Describer on one etcd client.
type etcdDriver struct {
	cli    *clientv3.Client
	keys   keyspace
	closes bool // the client was built from a URL and is ours to close
	pool   *pool
}

func newDriver(cli *clientv3.Client, prefix string, closes bool) (*etcdDriver, error) {
	if cli == nil {
		return nil, fmt.Errorf("%w: nil *clientv3.Client", dlock.ErrInvalidArgument)
	}
	if prefix == "" {
		return nil, fmt.Errorf("%w: empty etcd key prefix (the default is %q)", dlock.ErrInvalidArgument, DefaultPrefix)
	}
	return &etcdDriver{cli: cli, keys: keyspace{prefix: prefix}, closes: closes, pool: newPool(cli)}, nil
}

// Capabilities reports etcd's whole-second leases of at least MinTTL.
func (d *etcdDriver) Capabilities() driver.Capabilities {
	return driver.Capabilities{MinTTL: MinTTL, TTLGranularity: time.Second}
}

// Close revokes the driver's shared leases (deleting any key still under
// them), waits for its background work, and closes the client when it was
// opened from a URL.
func (d *etcdDriver) Close() error {
	d.pool.close()
	if d.closes {
		return d.cli.Close()
	}
	return nil
}

// leaseSeconds validates ttl as an etcd lease length.
func leaseSeconds(ttl time.Duration) (int64, error) {
	if ttl < MinTTL || ttl%time.Second != 0 {
		return 0, fmt.Errorf("%w: ttl %s: etcd leases are whole seconds, at least %s", dlock.ErrInvalidArgument, ttl, MinTTL)
	}
	return int64(ttl / time.Second), nil
}

// Compile-time checks of the optional interfaces.
var (
	_ driver.Queuer         = (*etcdDriver)(nil)
	_ driver.Lister         = (*etcdDriver)(nil)
	_ driver.ForceReleaser  = (*etcdDriver)(nil)
	_ driver.Describer      = (*etcdDriver)(nil)
	_ driver.BatchRefresher = (*etcdDriver)(nil)
	_ driver.BatchReleaser  = (*etcdDriver)(nil)
)

// cleanupTimeout bounds a best-effort clean-up in the background (deleting
// an abandoned key, revoking an idle lease).
const cleanupTimeout = 2 * time.Second
