package redlock

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	"github.com/redis/go-redis/v9"
)

// nodes is a set of independent redis-servers with an admin client each.
type nodes struct {
	srv   []*testserver.RedisServer
	admin []*redis.Client
}

func startNodes(t testing.TB, n int) *nodes {
	t.Helper()
	ns := &nodes{}
	for range n {
		s := testserver.Redis(t)
		c := redis.NewClient(&redis.Options{Addr: s.Addr, ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = c.Close() })
		ns.srv = append(ns.srv, s)
		ns.admin = append(ns.admin, c)
	}
	return ns
}

// url returns the redlock:// URL of the set, with an optional query.
func (ns *nodes) url(query string) string {
	addrs := make([]string, len(ns.srv))
	for i, s := range ns.srv {
		addrs[i] = s.Addr
	}
	u := "redlock://" + strings.Join(addrs, ",")
	if query != "" {
		u += "?" + query
	}
	return u
}

// clients returns fresh clients for the set, closed when t ends.
func (ns *nodes) clients(t testing.TB) []redis.UniversalClient {
	cs := make([]redis.UniversalClient, len(ns.srv))
	for i, s := range ns.srv {
		// A pool as large as the benchmarks' 64 goroutines, so that they
		// measure the nodes, not the wait for a pooled connection.
		c := redis.NewClient(&redis.Options{Addr: s.Addr, ContextTimeoutEnabled: true, PoolSize: 128})
		t.Cleanup(func() { _ = c.Close() })
		cs[i] = c
	}
	return cs
}

// locker returns a Locker configured by cfg over the set with its own
// clients; it is closed before the clients when t ends.
func (ns *nodes) locker(t testing.TB, cfg Config, opts ...dlock.Option) *dlock.Locker {
	t.Helper()
	cs := ns.clients(t)
	l, err := cfg.Locker(cs, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// expire deletes name's lock on the given nodes (all when none given).
func (ns *nodes) expire(t testing.TB, name string, which ...int) {
	t.Helper()
	if len(which) == 0 {
		for i := range ns.admin {
			which = append(which, i)
		}
	}
	for _, i := range which {
		if err := ns.admin[i].Del(context.Background(), layout.Lock(name)).Err(); err != nil {
			t.Fatalf("DEL on node %d: %v", i, err)
		}
	}
}

// settled waits until every node holds name: a grant returns once a
// majority holds it, and a slower node's write can land after the test's
// next step.
func (ns *nodes) settled(t testing.TB, name string) {
	t.Helper()
	for i, c := range ns.admin {
		for deadline := time.Now().Add(10 * time.Second); c.Exists(context.Background(), layout.Lock(name)).Val() == 0; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("node %d never got %q", i, name)
			}
		}
	}
}

// steal makes a foreign token hold name on a majority of the nodes.
func (ns *nodes) steal(t testing.TB, name string) {
	t.Helper()
	ctx := context.Background()
	for i := range len(ns.admin)/2 + 1 {
		c := ns.admin[i]
		f, err := c.Incr(ctx, layout.Counter(name, false)).Result()
		if err == nil {
			err = c.Set(ctx, layout.Lock(name), "thief-token\n"+strconv.FormatInt(f, 10)+"\nthief", time.Minute).Err()
		}
		if err != nil {
			t.Fatalf("steal on node %d: %v", i, err)
		}
	}
}

// holding lists the nodes on which name's lock key exists.
func (ns *nodes) holding(t testing.TB, name string) []int {
	t.Helper()
	var on []int
	for i, c := range ns.admin {
		if n, err := c.Exists(context.Background(), layout.Lock(name)).Result(); err == nil && n == 1 {
			on = append(on, i)
		}
	}
	return on
}
