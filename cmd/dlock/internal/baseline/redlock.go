package baseline

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/redlock"
	"github.com/redis/go-redis/v9"
)

// openRedlock compares package redlock with redsync's algorithm written
// out: SET NX PX on every node in parallel, a majority wins.
func openRedlock(ctx context.Context, u *url.URL, ttl time.Duration, opts []dlock.Option) (*Target, error) {
	cfg, nodes, err := redlockURL(u)
	if err != nil {
		return nil, err
	}
	t := &Target{
		Backend:  "redlock",
		Baseline: fmt.Sprintf("parallel SET NX PX on %d nodes, majority wins; Lua release on all (redsync's algorithm)", len(nodes)),
	}
	mk := t.redlockClients(ctx, nodes)
	err = t.redlockSides(ctx, mk, cfg, opts, ttl)
	if err == nil {
		err = t.redlockServerTime(mk)
	}
	if err != nil {
		t.Close()
		return nil, err
	}
	return t, nil
}

// redlockClients returns a function that connects one client per node,
// counting its round trips in rt (when not nil); the Target closes them.
func (t *Target) redlockClients(ctx context.Context, nodes []*redis.Options) func(rt *Counter) ([]redis.UniversalClient, error) {
	return func(rt *Counter) ([]redis.UniversalClient, error) {
		cs := make([]redis.UniversalClient, len(nodes))
		for i, o := range nodes {
			c := redis.NewClient(o)
			t.onClose(func() { _ = c.Close() })
			if err := c.Ping(ctx).Err(); err != nil {
				return nil, fmt.Errorf("connect to node %s: %w", o.Addr, err)
			}
			if rt != nil {
				c.AddHook(redisHook{rt})
			}
			cs[i] = c
		}
		return cs, nil
	}
}

// redlockServerTime measures the nodes' command time on admin clients of
// its own: the sum over all nodes.
func (t *Target) redlockServerTime(mk func(*Counter) ([]redis.UniversalClient, error)) error {
	admin, err := mk(nil)
	if err != nil {
		return err
	}
	t.ServerTime = func(ctx context.Context) (time.Duration, error) {
		var sum time.Duration
		for _, c := range admin {
			d, err := serverCPU(ctx, c)
			if err != nil {
				return 0, err
			}
			sum += d
		}
		return sum, nil
	}
	t.ServerTimeKind = "server process CPU (INFO cpu), all nodes"
	return nil
}

// redlockSides sets up both sides, each on clients of its own; the
// baseline uses the driver's node timeout.
func (t *Target) redlockSides(ctx context.Context, mk func(*Counter) ([]redis.UniversalClient, error), cfg redlock.Config,
	opts []dlock.Option, ttl time.Duration) error {
	drt, brt := &Counter{}, &Counter{}
	dcs, err := mk(drt)
	if err != nil {
		return err
	}
	t.NewLocker = func(o ...dlock.Option) (*dlock.Locker, error) {
		return cfg.Locker(dcs, append(slices.Clip(opts), o...)...)
	}
	if t.Dlock, err = t.dlockSide(func() (*dlock.Locker, error) { return t.NewLocker() }, drt); err != nil {
		return err
	}
	bcs, err := mk(brt)
	if err != nil {
		return err
	}
	nodeTimeout := cmp.Or(cfg.NodeTimeout, redlock.DefaultNodeTimeout)
	rb := &redlockBaseline{nodes: make([]*redisBaseline, len(bcs)), nodeTimeout: nodeTimeout, ttl: ttl}
	for i, c := range bcs {
		if rb.nodes[i], err = newRedisBaseline(ctx, c, ttl); err != nil {
			return err
		}
	}
	t.Base = Side{Cycle: rb.cycle, Contenders: polls(shared(rb.attempt)), RoundTrips: brt}
	return nil
}

// redlockURL reads the node list and redlock's keys node_timeout,
// fencing and tls; every node gets the rest of the query.
func redlockURL(u *url.URL) (redlock.Config, []*redis.Options, error) {
	q := u.Query()
	cfg, scheme, err := redlockQuery(q)
	if err != nil {
		return cfg, nil, err
	}
	var nodes []*redis.Options
	for h := range strings.SplitSeq(u.Host, ",") {
		if _, _, err := net.SplitHostPort(h); err != nil {
			h = net.JoinHostPort(h, "6379")
		}
		node := url.URL{Scheme: scheme, User: u.User, Host: h, Path: u.Path, RawQuery: q.Encode()}
		o, err := redis.ParseURL(node.String())
		if err != nil {
			return cfg, nil, fmt.Errorf("%w: redlock node %s: %s", dlock.ErrInvalidArgument, h, scrubURLErr(err, u))
		}
		o.ContextTimeoutEnabled = true
		nodes = append(nodes, o)
	}
	return cfg, nodes, nil
}

// redlockQuery takes redlock's own keys out of q: the driver's Config and
// the nodes' URL scheme (rediss with tls=true).
func redlockQuery(q url.Values) (redlock.Config, string, error) {
	var cfg redlock.Config
	scheme := "redis"
	if q.Has("node_timeout") {
		d, err := time.ParseDuration(q.Get("node_timeout"))
		if err != nil || d <= 0 {
			return cfg, "", fmt.Errorf("%w: redlock URL query node_timeout=%q: want a positive duration", dlock.ErrInvalidArgument, q.Get("node_timeout"))
		}
		cfg.NodeTimeout = d
	}
	for _, k := range []string{"fencing", "tls"} {
		if !q.Has(k) {
			continue
		}
		on, err := strconv.ParseBool(q.Get(k))
		if err != nil {
			return cfg, "", fmt.Errorf("%w: redlock URL query %s=%q: want true or false", dlock.ErrInvalidArgument, k, q.Get(k))
		}
		if k == "fencing" {
			cfg.NoFencing = !on
		} else if on {
			scheme = "rediss"
		}
	}
	for _, k := range []string{"node_timeout", "fencing", "tls"} {
		q.Del(k)
	}
	return cfg, scheme, nil
}

// redlockBaseline is Redlock as redsync implements it, without a fence.
type redlockBaseline struct {
	nodes       []*redisBaseline
	nodeTimeout time.Duration
	ttl         time.Duration
}

// try sets key on every node in parallel, each bounded by nodeTimeout, and
// wins with a majority inside the lease's validity; a loss undoes the
// nodes it took.
func (r *redlockBaseline) try(ctx context.Context, key, tok string) (bool, error) {
	start := time.Now()
	var won int
	var mu sync.Mutex
	r.each(ctx, func(ctx context.Context, n *redisBaseline) {
		ok, err := n.c.SetNX(ctx, key, tok, r.ttl).Result()
		if err == nil && ok {
			mu.Lock()
			won++
			mu.Unlock()
		}
	})
	if won > len(r.nodes)/2 && time.Since(start) < r.ttl {
		return true, nil
	}
	r.unlock(context.WithoutCancel(ctx), key, tok)
	return false, ctx.Err()
}

// unlock runs the token-checked release on every node in parallel.
func (r *redlockBaseline) unlock(ctx context.Context, key, tok string) {
	r.each(ctx, func(ctx context.Context, n *redisBaseline) { _ = n.unlock(ctx, key, tok) })
}

// each runs fn on every node in parallel, each under nodeTimeout.
func (r *redlockBaseline) each(ctx context.Context, fn func(context.Context, *redisBaseline)) {
	var wg sync.WaitGroup
	for _, n := range r.nodes {
		wg.Go(func() {
			nctx, cancel := context.WithTimeout(ctx, r.nodeTimeout)
			defer cancel()
			fn(nctx, n)
		})
	}
	wg.Wait()
}

func (r *redlockBaseline) cycle(ctx context.Context, name string) error {
	key, tok := keyFor(name), newToken()
	ok, err := r.try(ctx, key, tok)
	if err != nil || !ok {
		return fmt.Errorf("baseline: no majority for %s (%v)", key, err)
	}
	r.unlock(ctx, key, tok)
	return nil
}

// attempt is one try at name with a fresh token.
func (r *redlockBaseline) attempt(name string) attempt {
	key := keyFor(name)
	return func(ctx context.Context) (func(context.Context) error, bool, error) {
		tok := newToken()
		ok, err := r.try(ctx, key, tok)
		if err != nil || !ok {
			return nil, false, err
		}
		return func(ctx context.Context) error { r.unlock(ctx, key, tok); return nil }, true, nil
	}
}
