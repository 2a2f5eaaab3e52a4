package baseline

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/etcdlock"
	"github.com/dlockdev/dlock/internal/benchwork"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// openEtcd compares etcdlock with concurrency.Mutex.
func openEtcd(ctx context.Context, u *url.URL, ttl time.Duration, opts []dlock.Option) (*Target, error) {
	ccfg, lcfg, err := etcdURL(u)
	if err != nil {
		return nil, err
	}
	t := &Target{Backend: "etcd",
		Baseline: "concurrency.Mutex Lock+Unlock, every goroutine on one concurrency.Session"}
	mk := func(rt *Counter) (*clientv3.Client, error) {
		c := ccfg
		c.DialOptions = []grpc.DialOption{grpc.WithUnaryInterceptor(countUnary(rt)), grpc.WithStreamInterceptor(countStream(rt))}
		cli, err := clientv3.New(c)
		if err != nil {
			return nil, fmt.Errorf("connect: %w", err)
		}
		t.onClose(func() { _ = cli.Close() })
		// clientv3.New does not wait for a connection: ask once.
		if _, err := cli.Get(ctx, "dlock-bench-ping"); err != nil {
			return nil, fmt.Errorf("connect: %w", err)
		}
		return cli, nil
	}
	if err := t.etcdSides(ctx, mk, lcfg, ttl, opts); err != nil {
		t.Close()
		return nil, err
	}
	t.etcdMetrics(ctx, ccfg.Endpoints)
	return t, nil
}

func (t *Target) etcdSides(ctx context.Context, mk func(*Counter) (*clientv3.Client, error), lcfg etcdlock.Config, ttl time.Duration, opts []dlock.Option) error {
	drt, brt := &Counter{}, &Counter{}
	dc, err := mk(drt)
	if err != nil {
		return err
	}
	t.NewLocker = func(o ...dlock.Option) (*dlock.Locker, error) {
		return lcfg.Locker(dc, append(opts, o...)...)
	}
	if t.Dlock, err = t.dlockSide(func() (*dlock.Locker, error) { return t.NewLocker() }, drt); err != nil {
		return err
	}
	bc, err := mk(brt)
	if err != nil {
		return err
	}
	m := &etcdMutex{cli: bc, ttl: max(2, int(math.Ceil(ttl.Seconds())))}
	if m.shared, err = concurrency.NewSession(bc, concurrency.WithTTL(m.ttl)); err != nil {
		return fmt.Errorf("baseline session: %w", err)
	}
	t.onClose(func() { _ = m.shared.Close() })
	waits := append([]Contender{{Name: "concurrency.Mutex Lock, one Session each", Contend: m.contend}}, polls(m.attempts)...)
	t.Base = Side{Cycle: m.cycle, Contenders: waits, RoundTrips: brt}
	// The handoff's yardstick: one Put, on the baseline's client between
	// rounds (so counted in no side's round trips). A handoff takes at
	// least the delete that frees the lock and the watch event it sends.
	t.Write, t.WriteKind = func(ctx context.Context) error {
		_, err := bc.Put(ctx, keyFor("write"), "x")
		return err
	}, "one etcd Put"
	return nil
}

// etcdURL reads etcd://[user[:password]@]host:port[,host:port...] with the
// keys prefix, dial_timeout and election_timeout, as etcdlock does.
func etcdURL(u *url.URL) (clientv3.Config, etcdlock.Config, error) {
	c := clientv3.Config{DialTimeout: etcdlock.DefaultDialTimeout, Logger: zap.NewNop()}
	lc := etcdlock.Config{Prefix: etcdlock.DefaultPrefix}
	if u.User != nil {
		c.Username = u.User.Username()
		c.Password, _ = u.User.Password()
	}
	for h := range strings.SplitSeq(u.Host, ",") {
		if _, _, err := net.SplitHostPort(h); err != nil {
			return c, lc, fmt.Errorf("%w: etcd endpoint %q: want host:port", dlock.ErrInvalidArgument, h)
		}
		c.Endpoints = append(c.Endpoints, h)
	}
	for key, vals := range u.Query() {
		v := vals[len(vals)-1]
		switch key {
		case "prefix":
			lc.Prefix = v
		case "election_timeout":
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return c, lc, fmt.Errorf("%w: etcd URL election_timeout=%q: want a positive duration", dlock.ErrInvalidArgument, v)
			}
			lc.ElectionTimeout = d
		case "dial_timeout":
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return c, lc, fmt.Errorf("%w: etcd URL dial_timeout=%q: want a positive duration", dlock.ErrInvalidArgument, v)
			}
			c.DialTimeout = d
		default:
			return c, lc, fmt.Errorf("%w: etcd URL: unknown query key %q", dlock.ErrInvalidArgument, key)
		}
	}
	return c, lc, nil
}

// countUnary counts every unary call (Range, Txn, Put, LeaseGrant,
// LeaseRevoke...) as one round trip.
func countUnary(rt *Counter) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		rt.Add(1)
		return invoker(ctx, method, req, reply, cc, opts...)
	}
}

// countStream counts every message sent on a stream (a watch request, a
// lease keep-alive) as one round trip.
func countStream(rt *Counter) grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		s, err := streamer(ctx, desc, cc, method, opts...)
		if err != nil {
			return nil, err
		}
		return countedStream{s, rt}, nil
	}
}

type countedStream struct {
	grpc.ClientStream
	rt *Counter
}

func (s countedStream) SendMsg(m any) error {
	s.rt.Add(1)
	return s.ClientStream.SendMsg(m)
}

// etcdMutex is etcd's own lock recipe.
type etcdMutex struct {
	cli    *clientv3.Client
	ttl    int // seconds
	shared *concurrency.Session
}

func (m *etcdMutex) cycle(ctx context.Context, name string) error {
	mu := concurrency.NewMutex(m.shared, keyFor(name))
	if err := mu.Lock(ctx); err != nil {
		return err
	}
	return mu.Unlock(ctx)
}

// contend gives each waiter a Session of its own, as separate processes
// would have: a Mutex is re-entrant within one Session.
func (m *etcdMutex) contend(ctx context.Context, workers int, name string) (benchwork.Lock, func(), error) {
	return perWorker(ctx, workers, func(context.Context) (benchwork.Lock, func(), error) {
		mu, closeSession, err := m.ownMutex(name)
		if err != nil {
			return nil, nil, err
		}
		lock := func(ctx context.Context, _ int) (func(context.Context) error, error) {
			if err := mu.Lock(ctx); err != nil {
				return nil, err
			}
			return mu.Unlock, nil
		}
		return lock, closeSession, nil
	})
}

// attempts are Mutex.TryLock, each worker on a Session of its own.
func (m *etcdMutex) attempts(_ context.Context, workers int, name string) ([]attempt, func(), error) {
	as := make([]attempt, 0, workers)
	var closers []func()
	teardown := func() {
		for _, c := range closers {
			c()
		}
	}
	for range workers {
		mu, closeSession, err := m.ownMutex(name)
		if err != nil {
			teardown()
			return nil, nil, err
		}
		closers = append(closers, closeSession)
		as = append(as, func(ctx context.Context) (func(context.Context) error, bool, error) {
			err := mu.TryLock(ctx)
			if errors.Is(err, concurrency.ErrLocked) {
				return nil, false, nil
			}
			if err != nil {
				return nil, false, err
			}
			return mu.Unlock, true, nil
		})
	}
	return as, teardown, nil
}

// ownMutex is a Mutex on name over a new Session, and the Session's close.
func (m *etcdMutex) ownMutex(name string) (*concurrency.Mutex, func(), error) {
	s, err := concurrency.NewSession(m.cli, concurrency.WithTTL(m.ttl))
	if err != nil {
		return nil, nil, err
	}
	return concurrency.NewMutex(s, keyFor(name)), func() { _ = s.Close() }, nil
}

// etcdMetrics sets ServerTime from etcd's process_cpu_seconds_total, read
// from /metrics on the client port, when every endpoint answers.
func (t *Target) etcdMetrics(ctx context.Context, endpoints []string) {
	hc := &http.Client{Timeout: 5 * time.Second}
	read := func(ctx context.Context) (time.Duration, error) {
		var sum time.Duration
		for _, ep := range endpoints {
			d, err := processCPU(ctx, hc, "http://"+ep+"/metrics")
			if err != nil {
				return 0, err
			}
			sum += d
		}
		return sum, nil
	}
	if _, err := read(ctx); err == nil {
		t.ServerTime, t.ServerTimeKind = read, "process_cpu_seconds_total from /metrics"
	}
}

// processCPU reads process_cpu_seconds_total from a Prometheus endpoint.
func processCPU(ctx context.Context, hc *http.Client, url string) (time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "process_cpu_seconds_total "); ok {
			s, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return time.Duration(s * float64(time.Second)), err
		}
	}
	return 0, fmt.Errorf("no process_cpu_seconds_total at %s", url)
}
