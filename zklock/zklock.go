package zklock

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/driver"
	"github.com/go-zookeeper/zk"
)

// Scheme is the URL scheme this package registers:
// zk://host:port[,host:port...]/root.
const Scheme = "zk"

// DefaultRoot is the znode under which lock nodes live unless the URL's
// path or Config.Root says otherwise.
const DefaultRoot = "/dlock"

func init() { dlock.Register(Scheme, open) }

// Config says where a Locker's locks live and how long its session lasts.
type Config struct {
	// Root is the znode holding one child per lock name (default
	// DefaultRoot). Lockers that should see each other's locks use the
	// same Root. It is created, with its ancestors, when missing.
	Root string
	// SessionTimeout is the session timeout the *zk.Conn was opened with
	// (zk.Connect's second argument); it is required (see Locker). The
	// URL query key is session_timeout. Leases are granted
	// for at most this long, so the watchdog declares a lease lost before
	// ZooKeeper can expire the session. If the server negotiated a shorter
	// timeout (its maxSessionTimeout), give that one.
	SessionTimeout time.Duration
	// ACL is the ACL of the nodes the Locker creates (default
	// zk.WorldACL(zk.PermAll)).
	ACL []zk.ACL
}

// Locker returns a Locker whose locks live in ZooKeeper under c.Root,
// reached through conn, whose session is the lease of every lock the
// Locker holds. The Locker never closes conn. opts become its defaults.
//
// Unlike the other drivers, zklock has no New(conn, opts...): ZooKeeper
// does not tell a client the session timeout it negotiated, and assuming
// one longer than conn's would let the watchdog trust a lease after the
// session (and with it the lock) could have expired. c.SessionTimeout is
// therefore required.
func (c Config) Locker(conn *zk.Conn, opts ...dlock.Option) (*dlock.Locker, error) {
	d, err := newDriver(conn, c, false)
	if err != nil {
		return nil, err
	}
	return dlock.NewLocker(d, opts...)
}

// Driver returns the bare driver on conn, for callers assembling their
// own Locker with dlock.NewLocker. Closing the driver leaves conn open.
func (c Config) Driver(conn *zk.Conn) (driver.Driver, error) {
	return newDriver(conn, c, false)
}

// zkDriver implements driver.Driver and the optional interfaces that
// interfaces.go lists on one ZooKeeper session.
type zkDriver struct {
	conn    *zk.Conn
	root    string
	acl     []zk.ACL
	timeout time.Duration
	closes  bool // the connection was opened from a URL and is ours to close
	// dialTimeout is the URL's dial_timeout; 0 on a caller's connection.
	dialTimeout time.Duration
	logger      *slog.Logger

	mu   sync.Mutex
	held map[lockKey]node // granted nodes, by name and token

	bg   sync.WaitGroup // clean-ups of nodes created after their caller gave up
	done chan struct{}  // closed by Close
}

type lockKey struct{ name, token string }

// node is one contender's znode.
type node struct {
	path    string
	czxid   int64 // the fence of a grant
	session int64 // the session that created it
}

func newDriver(conn *zk.Conn, cfg Config, closes bool) (*zkDriver, error) {
	if conn == nil {
		return nil, fmt.Errorf("%w: nil *zk.Conn", dlock.ErrInvalidArgument)
	}
	if cfg.SessionTimeout <= 0 {
		return nil, fmt.Errorf("%w: zklock.Config.SessionTimeout %s: give the session timeout the *zk.Conn was opened with", dlock.ErrInvalidArgument, cfg.SessionTimeout)
	}
	root, err := cleanRoot(cfg.Root)
	if err != nil {
		return nil, err
	}
	acl := cfg.ACL
	if len(acl) == 0 {
		acl = zk.WorldACL(zk.PermAll)
	}
	return &zkDriver{
		conn: conn, root: root, acl: acl, timeout: cfg.SessionTimeout, closes: closes,
		logger: slog.Default(), held: map[lockKey]node{}, done: make(chan struct{}),
	}, nil
}

// cleanRoot validates a root znode path; "" is DefaultRoot.
func cleanRoot(root string) (string, error) {
	if root == "" {
		return DefaultRoot, nil
	}
	root = strings.TrimSuffix(root, "/")
	if root == "" {
		return "", fmt.Errorf("%w: zookeeper root %q: locks cannot live at the top of the tree (use a path such as %s)", dlock.ErrInvalidArgument, "/", DefaultRoot)
	}
	if !strings.HasPrefix(root, "/") || strings.Contains(root, "//") {
		return "", fmt.Errorf("%w: zookeeper root %q: want an absolute znode path such as %s", dlock.ErrInvalidArgument, root, DefaultRoot)
	}
	if root == "/zookeeper" || strings.HasPrefix(root, "/zookeeper/") {
		return "", fmt.Errorf("%w: zookeeper root %q: /zookeeper is ZooKeeper's own subtree", dlock.ErrInvalidArgument, root)
	}
	for _, part := range strings.Split(root[1:], "/") {
		if part == "." || part == ".." {
			return "", fmt.Errorf("%w: zookeeper root %q: \".\" and \"..\" are not znode names", dlock.ErrInvalidArgument, root)
		}
	}
	return root, nil
}

// Capabilities reports that a lease is the ZooKeeper session: it ends
// when the session ends, and the TTL only sets the watchdog's cadence.
// adoptWhyNot says why ZooKeeper cannot adopt a lease.
const adoptWhyNot = "a ZooKeeper lock is an ephemeral node of the session that created it: adopting it would " +
	"take over that session, and with it every lock the session holds"

func (d *zkDriver) Capabilities() driver.Capabilities {
	return driver.Capabilities{SessionBound: true, AdoptWhyNot: adoptWhyNot}
}

// SetLogger sets where the driver logs.
func (d *zkDriver) SetLogger(l *slog.Logger) { d.logger = l }

// Close waits (briefly) for background clean-ups and closes the
// connection when it was opened from a URL. Closing the connection ends
// the session, which deletes every node it still owns.
func (d *zkDriver) Close() error {
	close(d.done)
	if d.closes {
		d.conn.Close()
	}
	waited := make(chan struct{})
	go func() { d.bg.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(cleanupTimeout):
	}
	return nil
}

// cleanupTimeout bounds a best-effort clean-up (deleting an abandoned
// node) that must happen even though the caller's context is done.
const cleanupTimeout = 2 * time.Second

// detached returns a context for such a clean-up.
func detached(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
}

func (d *zkDriver) remember(name, token string, n node) {
	d.mu.Lock()
	d.held[lockKey{name, token}] = n
	d.mu.Unlock()
}

func (d *zkDriver) lookup(name, token string) (node, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n, ok := d.held[lockKey{name, token}]
	return n, ok
}

func (d *zkDriver) forget(name, token string) {
	d.mu.Lock()
	delete(d.held, lockKey{name, token})
	d.mu.Unlock()
}
