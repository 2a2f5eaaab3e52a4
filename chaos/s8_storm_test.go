package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// stormWaiters is the storm's 200 waiters.
const stormWaiters = 200

// TestS8CancellationStorm: 200 waiters queue behind a holder and cancel
// after a random 0–50 ms. None may be granted while the holder holds; once
// it releases, the lock must be free at once (a TryAcquire succeeds), and
// nothing may be left behind: no holder, no queue entry, key, row or
// advisory lock — checked on the backend itself, also a moment later, to
// catch a cancelled statement the server finished after the client gave
// up.
func TestS8CancellationStorm(t *testing.T) {
	for _, b := range append(allBackends(t), mysqlBackends(t, testserver.MariaDB(t))...) {
		t.Run(b.Name, func(t *testing.T) { s8Case(t, b) })
	}
}

func s8Case(t *testing.T, b backend) {
	row := Row{Scenario: "S8 cancellation storm, 200 waiters (grants while held, orphans, not free at once)",
		Backend: b.Name, Expect: ExpectSafe, Metric: "release→next grant"}
	holder := openLocker(t, b, dlock.WithTTL(b.TTL))
	waiters := []*dlock.Locker{openLocker(t, b, dlock.WithTTL(b.TTL)), openLocker(t, b, dlock.WithTTL(b.TTL))}
	var granted, orphans, notFree int
	for i := range trials(1) {
		r := s8Trial(t, b, holder, waiters, i)
		row.Trials++
		granted += r.granted
		orphans += r.orphans
		if !r.freeAtOnce {
			notFree++
		}
		if r.granted > 0 || r.orphans > 0 || !r.freeAtOnce {
			row.Violations++
		}
		if r.lin != nil {
			row.Unlinearizable++
			t.Logf("trial %d: %v", i, r.lin)
		}
		row.Timings = append(row.Timings, r.next)
		for _, o := range r.orphanWhat {
			t.Logf("trial %d: orphan: %s", i, o)
		}
	}
	row.Note = fmt.Sprintf("waiters granted while held: %d, orphans: %d, not free at once: %d", granted, orphans, notFree)
	report(t, row)
}

type s8Result struct {
	granted, orphans int
	orphanWhat       []string
	freeAtOnce       bool
	next             time.Duration
	lin              error
}

func s8Trial(t *testing.T, b backend, holder *dlock.Locker, waiters []*dlock.Locker, trial int) s8Result {
	ctx := context.Background()
	name := lockName("s8", trial)
	var h History
	call := time.Now()
	ls, err := holder.Acquire(ctx, name)
	ret := time.Now()
	if err != nil {
		t.Fatalf("holder: %v", err)
	}
	h.Grant(0, ls.Fence(), call, ret)
	var r s8Result
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range stormWaiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wctx, cancel := context.WithTimeout(ctx, rand.N(50*time.Millisecond+1))
			defer cancel()
			call := time.Now()
			got, err := waiters[i%len(waiters)].Acquire(wctx, name, dlock.WithWait(10*time.Second))
			ret := time.Now()
			if err == nil {
				h.Grant(i+1, got.Fence(), call, ret)
				mu.Lock()
				r.granted++
				mu.Unlock()
				rc := time.Now()
				_ = got.Release(ctx)
				h.End(i+1, rc, time.Now())
			} else if !errors.Is(err, dlock.ErrNotAcquired) && !errors.Is(err, context.DeadlineExceeded) {
				t.Logf("waiter: unexpected error: %v", err)
			}
		}()
	}
	wg.Wait()
	rc := time.Now()
	if err := ls.Release(ctx); err != nil {
		t.Errorf("holder's release after the storm: %v", err)
	}
	released := time.Now()
	h.End(0, rc, released)
	next, err := holder.TryAcquire(ctx, name)
	ret = time.Now()
	r.freeAtOnce = err == nil
	if err != nil {
		t.Logf("TryAcquire right after the release: %v", err)
		next, err = holder.Acquire(ctx, name, dlock.WithWait(3*b.TTL+10*time.Second))
		ret = time.Now()
		if err != nil {
			t.Fatalf("lock never free after the storm: %v", err)
		}
	}
	r.next = ret.Sub(released)
	h.Grant(-1, next.Fence(), rc, ret)
	rc = time.Now()
	if err := next.Release(ctx); err != nil {
		t.Errorf("release after the storm: %v", err)
	}
	h.End(-1, rc, time.Now())
	time.Sleep(300 * time.Millisecond) // let a late statement land, if any
	r.orphanWhat = leftovers(t, b, holder, name)
	r.orphans = len(r.orphanWhat)
	r.lin = h.Check()
	return r
}

// leftovers lists what the backend still keeps for name once nobody holds
// or waits for it: a holder, queue entries, keys, rows, advisory locks.
func leftovers(t *testing.T, b backend, l *dlock.Locker, name string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out []string
	if hd, ok, err := l.Inspect(ctx, name); err != nil {
		t.Logf("inspect: %v", err)
	} else if ok {
		out = append(out, fmt.Sprintf("holder %q fence %d ttl %s", hd.Owner, hd.Fence, hd.TTL))
	}
	switch {
	case b.Name == "redis":
		out = append(out, redisLeftovers(t, ctx, b.URL, name)...)
	case b.Name == "postgres (lease)":
		out = append(out, pgLeftovers(t, ctx, b.URL, `SELECT count(*) FROM dlock_leases WHERE name = $1 AND token IS NOT NULL`, name, "lease rows with a token")...)
	case b.Name == "postgres (advisory)":
		out = append(out, pgLeftovers(t, ctx, b.URL, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND $1::text IS NOT NULL`, name, "advisory locks")...)
	case b.Name == "etcd":
		out = append(out, etcdLeftovers(t, ctx, b.URL, name)...)
	case strings.HasPrefix(b.Name, "mariadb"):
		out = append(out, mysqlLeftovers(t, ctx, b.URL, name)...)
	}
	return out
}

func redisLeftovers(t *testing.T, ctx context.Context, rawURL, name string) []string {
	opt, err := redis.ParseURL(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opt)
	defer c.Close()
	keys, err := c.Keys(ctx, "dlock:{"+name+"}*").Result()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, k := range keys {
		if strings.HasSuffix(k, ":fence") {
			continue
		}
		typ, _ := c.Type(ctx, k).Result()
		n := int64(1)
		switch typ {
		case "zset":
			n, _ = c.ZCard(ctx, k).Result()
		case "hash":
			n, _ = c.HLen(ctx, k).Result()
		case "set":
			n, _ = c.SCard(ctx, k).Result()
		case "list":
			n, _ = c.LLen(ctx, k).Result()
		}
		ttl, _ := c.PTTL(ctx, k).Result()
		out = append(out, fmt.Sprintf("redis key %s (%s, %d entries, ttl %s)", k, typ, n, ttl))
	}
	return out
}

func pgLeftovers(t *testing.T, ctx context.Context, rawURL, query, name, what string) []string {
	u, _ := url.Parse(rawURL)
	q := u.Query()
	q.Del("mode")
	u.RawQuery = q.Encode()
	c, err := pgx.Connect(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var n int
	if err := c.QueryRow(ctx, query, name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		return nil
	}
	return []string{fmt.Sprintf("%d %s", n, what)}
}

func etcdLeftovers(t *testing.T, ctx context.Context, rawURL, name string) []string {
	hosts, _, _ := strings.Cut(strings.TrimPrefix(rawURL, "etcd://"), "?")
	eps := strings.Split(hosts, ",")
	c, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	resp, err := c.Get(ctx, "dlock/"+url.PathEscape(name)+"/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, kv := range resp.Kvs {
		out = append(out, fmt.Sprintf("etcd key %s (lease %x)", kv.Key, kv.Lease))
	}
	return out
}
