package baseline

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/internal/benchwork"
	"github.com/dlockdev/dlock/zklock"
	"github.com/go-zookeeper/zk"
)

// Znodes of the hand-written ZooKeeper locks: a try-lock's node per name
// under zkTryRoot, zk.NewLock's queue per name under zkQueueRoot.
const (
	zkTryRoot   = "/dlock-bench-baseline"
	zkQueueRoot = "/dlock-bench-baseline-queue"
)

// zkSettings is what a zk:// URL says, read as zklock reads it.
type zkSettings struct {
	servers        []string
	user, password string
	root           string
	sessionTimeout time.Duration
	dialTimeout    time.Duration
}

// openZooKeeper compares zklock with the hand-written ZooKeeper lock,
// every side on connections (sessions) of its own.
func openZooKeeper(ctx context.Context, u *url.URL, opts []dlock.Option) (*Target, error) {
	zs, err := zkURL(u)
	if err != nil {
		return nil, err
	}
	t := &Target{Backend: "zookeeper",
		Baseline: "an ephemeral node created in one multi with a write whose zxid is the fence, deleted to release"}
	if err := t.zkSides(ctx, zs, opts); err != nil {
		t.Close()
		return nil, err
	}
	return t, nil
}

func (t *Target) zkSides(ctx context.Context, zs zkSettings, opts []dlock.Option) error {
	drt, brt := &Counter{}, &Counter{}
	dc, err := t.zkConn(ctx, zs, drt)
	if err != nil {
		return err
	}
	cfg := zklock.Config{Root: zs.root, SessionTimeout: zs.sessionTimeout, ACL: zs.acl()}
	t.NewLocker = func(o ...dlock.Option) (*dlock.Locker, error) { return cfg.Locker(dc, append(opts, o...)...) }
	if t.Dlock, err = t.dlockSide(func() (*dlock.Locker, error) { return t.NewLocker() }, drt); err != nil {
		return err
	}
	// Each contender is a process of its own: a Locker on a session of
	// its own.
	t.Dlock.Contenders[0].Contend = func(ctx context.Context, workers int, name string) (benchwork.Lock, func(), error) {
		return perWorker(ctx, workers, func(ctx context.Context) (benchwork.Lock, func(), error) {
			c, err := t.zkConn(ctx, zs, drt)
			if err != nil {
				return nil, nil, err
			}
			l, err := cfg.Locker(c, opts...)
			if err != nil {
				return nil, nil, err
			}
			lock := benchwork.Acquire([]*dlock.Locker{l}, name, dlock.WithWait(dlock.Forever))
			return func(ctx context.Context, _ int) (func(context.Context) error, error) { return lock(ctx, 0) },
				func() { _ = l.Close(); c.Close() }, nil
		})
	}
	b := &zkBaseline{t: t, zs: zs, rt: brt, acl: zs.acl()}
	// Closers run last first: the waits given up end when their sessions
	// close, and are waited for after that.
	t.onClose(b.abandoned.Wait)
	bc, err := t.zkConn(ctx, zs, brt)
	if err != nil {
		return err
	}
	for _, root := range []string{zkTryRoot, zkQueueRoot} {
		if err := zkEnsure(bc, root, b.acl); err != nil {
			return fmt.Errorf("create %s: %w", root, err)
		}
	}
	waits := append([]Contender{{Name: "zk.NewLock, one connection each", Contend: b.contend}}, polls(b.attempts)...)
	t.Base = Side{Cycle: b.cycleOn(bc), Contenders: waits, RoundTrips: brt}
	return nil
}

// zkURL reads zk://[user:password@]host:port[,host:port...][/root] with
// the keys session_timeout and dial_timeout.
func zkURL(u *url.URL) (zkSettings, error) {
	zs := zkSettings{root: zklock.DefaultRoot, sessionTimeout: zklock.DefaultSessionTimeout, dialTimeout: zklock.DefaultDialTimeout}
	if u.User != nil {
		zs.user = u.User.Username()
		zs.password, _ = u.User.Password()
	}
	if p := strings.TrimSuffix(u.Path, "/"); p != "" {
		zs.root = p
	}
	for h := range strings.SplitSeq(u.Host, ",") {
		if _, _, err := net.SplitHostPort(h); err != nil {
			h = net.JoinHostPort(h, "2181")
		}
		zs.servers = append(zs.servers, h)
	}
	for key, vals := range u.Query() {
		d, err := time.ParseDuration(vals[len(vals)-1])
		if err != nil || d <= 0 {
			return zs, fmt.Errorf("%w: zk URL %s=%q: want a positive duration", dlock.ErrInvalidArgument, key, vals[len(vals)-1])
		}
		switch key {
		case "session_timeout":
			zs.sessionTimeout = d
		case "dial_timeout":
			zs.dialTimeout = d
		default:
			return zs, fmt.Errorf("%w: zk URL: unknown query key %q", dlock.ErrInvalidArgument, key)
		}
	}
	return zs, nil
}

// acl is the ACL of the nodes the sides create: the user's own with
// digest credentials, else open to all.
func (zs zkSettings) acl() []zk.ACL {
	if zs.user != "" {
		return zk.AuthACL(zk.PermAll)
	}
	return zk.WorldACL(zk.PermAll)
}

// zkConn opens a session whose requests rt counts, waits for it, and
// closes it with the Target.
func (t *Target) zkConn(ctx context.Context, zs zkSettings, rt *Counter) (*zk.Conn, error) {
	c, _, err := zk.Connect(zs.servers, zs.sessionTimeout, zk.WithDialer(countingDialer(rt)), zk.WithLogInfo(false), zk.WithLogger(zkQuiet{}))
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	t.onClose(c.Close)
	ctx, cancel := context.WithTimeout(ctx, zs.dialTimeout)
	defer cancel()
	for c.State() != zk.StateHasSession {
		if err := pause(ctx, 5*time.Millisecond); err != nil {
			return nil, fmt.Errorf("connect: no session (%s): %w", c.State(), err)
		}
	}
	if zs.user != "" {
		if err := c.AddAuth("digest", []byte(zs.user+":"+zs.password)); err != nil {
			return nil, fmt.Errorf("digest authentication as %q: %w", zs.user, err)
		}
	}
	return c, nil
}

// zkQuiet drops go-zookeeper's connection log lines.
type zkQuiet struct{}

func (zkQuiet) Printf(string, ...any) {}

// countingDialer dials TCP and counts, in rt, every request packet
// written: one with a positive xid. A session's connect request (which
// has no xid: the protocol version, 0, stands there), pings (xid -2),
// authentication (-4) and watch re-registration (-8) are not counted.
func countingDialer(rt *Counter) zk.Dialer {
	return func(network, address string, timeout time.Duration) (net.Conn, error) {
		c, err := net.DialTimeout(network, address, timeout)
		if err != nil {
			return nil, err
		}
		return zkCounted{c, rt}, nil
	}
}

type zkCounted struct {
	net.Conn
	rt *Counter
}

// Write counts a request: go-zookeeper writes each packet (its length,
// then its header, xid first) in one Write.
func (c zkCounted) Write(b []byte) (int, error) {
	if len(b) >= 8 && int32(binary.BigEndian.Uint32(b[4:8])) > 0 {
		c.rt.Add(1)
	}
	return c.Conn.Write(b)
}

// zkEnsure creates the persistent node p if it is missing.
func zkEnsure(c *zk.Conn, p string, acl []zk.ACL) error {
	_, err := c.Create(p, nil, 0, acl)
	if errors.Is(err, zk.ErrNodeExists) {
		return nil
	}
	return err
}

// zkEscape makes a lock name one znode name.
func zkEscape(name string) string { return url.QueryEscape(name) }

// zkBaseline is the hand-written ZooKeeper lock.
type zkBaseline struct {
	t   *Target
	zs  zkSettings
	rt  *Counter
	acl []zk.ACL
	// workers are the contended workers' sessions, shared by the ways of
	// waiting (which run one after another): ZooKeeper limits the
	// connections of one client address (maxClientCnxns, 60 by default).
	workers []*zk.Conn
	// abandoned counts zk.NewLock waits given up and still under way.
	abandoned sync.WaitGroup
}

// sessions returns n sessions of the contended workers, opening the
// missing ones; the Target closes them.
func (b *zkBaseline) sessions(ctx context.Context, n int) ([]*zk.Conn, error) {
	for len(b.workers) < n {
		c, err := b.t.zkConn(ctx, b.zs, b.rt)
		if err != nil {
			return nil, err
		}
		b.workers = append(b.workers, c)
	}
	return b.workers[:n], nil
}

// try creates the name's ephemeral lock node and, in the same multi,
// writes zkTryRoot, so that the transaction's zxid (the root's new mzxid)
// is the fence. It reports false when the node exists (held).
func (b *zkBaseline) try(c *zk.Conn, name string) (string, bool, error) {
	node := zkTryRoot + "/" + zkEscape(name)
	res, err := c.Multi(
		&zk.CreateRequest{Path: node, Acl: b.acl, Flags: zk.FlagEphemeral},
		&zk.SetDataRequest{Path: zkTryRoot, Version: -1})
	if err == nil && len(res) > 0 {
		err = res[0].Error
	}
	switch {
	case err == nil:
		return node, true, nil
	case errors.Is(err, zk.ErrNodeExists):
		return "", false, nil
	}
	return "", false, err
}

// cycleOn is the uncontended cycle on one shared connection.
func (b *zkBaseline) cycleOn(c *zk.Conn) benchwork.Cycle {
	return func(_ context.Context, name string) error {
		node, ok, err := b.try(c, name)
		if err != nil {
			return err
		}
		if !ok {
			return held(name)
		}
		return c.Delete(node, -1)
	}
}

// attempts are tries of the ephemeral node, each worker on its session.
func (b *zkBaseline) attempts(ctx context.Context, workers int, name string) ([]attempt, func(), error) {
	conns, err := b.sessions(ctx, workers)
	if err != nil {
		return nil, nil, err
	}
	as := make([]attempt, workers)
	for i, c := range conns {
		as[i] = func(context.Context) (func(context.Context) error, bool, error) {
			node, ok, err := b.try(c, name)
			if err != nil || !ok {
				return nil, false, err
			}
			return func(context.Context) error { return c.Delete(node, -1) }, true, nil
		}
	}
	return as, func() {}, nil
}

// contend is go-zookeeper's zk.NewLock, each waiter on its session. Lock
// takes no context: a wait given up goes on in the background and
// releases what it gets (or ends when the Target closes its session).
func (b *zkBaseline) contend(ctx context.Context, workers int, name string) (benchwork.Lock, func(), error) {
	conns, err := b.sessions(ctx, workers)
	if err != nil {
		return nil, nil, err
	}
	path := zkQueueRoot + "/" + zkEscape(name)
	lock := func(ctx context.Context, w int) (func(context.Context) error, error) {
		m := zk.NewLock(conns[w], path, b.acl)
		done := make(chan error) // unbuffered: a grant is handed over, or released here
		b.abandoned.Add(1)
		go func() {
			defer b.abandoned.Done()
			err := m.Lock()
			select {
			case done <- err:
			case <-ctx.Done():
				if err == nil {
					_ = m.Unlock()
				}
			}
		}()
		select {
		case err := <-done:
			if err != nil {
				return nil, err
			}
			return func(context.Context) error { return m.Unlock() }, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return lock, func() {}, nil
}
