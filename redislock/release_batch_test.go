package redislock

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	"github.com/redis/go-redis/v9"
)

// testReleaseBatch: 2,500 leases (three script calls per slot group on a
// single server) released in one batch, with one gone and one taken over;
// a waiter's channel hears the release.
func testReleaseBatch(t *testing.T, c redis.UniversalClient) {
	d := testDriver(t, c)
	ctx := testCtx(t)
	var items []driver.ReleaseItem
	for i := range 2500 {
		req := driver.Request{Name: fmt.Sprintf("rbatch/%d", i), Token: fmt.Sprintf("tok-%d", i), Owner: "me", TTL: time.Minute}
		if g, err := d.TryAcquire(ctx, req); err != nil || !g.Acquired {
			t.Fatalf("acquire %d: %+v %v", i, g, err)
		}
		items = append(items, driver.ReleaseItem{Name: req.Name, Token: req.Token})
	}
	c.Del(ctx, d.keys.Lock("rbatch/7"))
	c.Set(ctx, d.keys.Lock("rbatch/9"), "thief\n1\nx", time.Minute)
	wake, stop, err := d.Watch(ctx, "rbatch/3")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	results, err := d.ReleaseBatch(ctx, items)
	if err != nil || len(results) != len(items) {
		t.Fatalf("ReleaseBatch = %d results, %v", len(results), err)
	}
	for i, err := range results {
		var want error
		switch i {
		case 7:
			want = driver.ErrExpired
		case 9:
			want = driver.ErrTakenOver
		}
		if !errors.Is(err, want) || (want == nil && err != nil) {
			t.Errorf("result %d = %v, want %v", i, err, want)
		}
	}
	for _, i := range []int{0, 1234, 2499} {
		if n := c.Exists(ctx, d.keys.Lock("rbatch/"+strconv.Itoa(i))).Val(); n != 0 {
			t.Errorf("lock %d still exists after the batch release", i)
		}
	}
	select {
	case <-wake:
	case <-time.After(5 * time.Second):
		t.Error("a watcher of a released lock was not woken")
	}
}

func TestReleaseBatch(t *testing.T) { testReleaseBatch(t, singleClient(t)) }

func TestReleaseBatchCluster(t *testing.T) {
	cl := testserver.RedisCluster(t, 3)
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs})
	t.Cleanup(func() { _ = c.Close() })
	testReleaseBatch(t, c)
}

// TestDiagnose reads real servers configured safely and unsafely.
func TestDiagnose(t *testing.T) {
	cases := []struct {
		what string
		args []string
		want map[string]driver.Verdict
	}{
		{"defaults (no persistence)", nil, map[string]driver.Verdict{
			"redis persistence": driver.VerdictUnsafe, "redis eviction": driver.VerdictOK,
			"redis replication": driver.VerdictOK, "redis cluster mode": driver.VerdictOK,
			"redis version": driver.VerdictOK, "redis client deadlines": driver.VerdictWarn}},
		{"AOF always, noeviction", []string{"--appendonly", "yes", "--appendfsync", "always", "--maxmemory", "100mb", "--maxmemory-policy", "noeviction"},
			map[string]driver.Verdict{"redis persistence": driver.VerdictOK, "redis eviction": driver.VerdictOK}},
		{"AOF everysec, volatile-lru", []string{"--appendonly", "yes", "--appendfsync", "everysec", "--maxmemory", "100mb", "--maxmemory-policy", "volatile-lru"},
			map[string]driver.Verdict{"redis persistence": driver.VerdictWarn, "redis eviction": driver.VerdictUnsafe}},
		{"allkeys-lru", []string{"--maxmemory", "100mb", "--maxmemory-policy", "allkeys-lru"},
			map[string]driver.Verdict{"redis eviction": driver.VerdictUnsafe}},
	}
	for _, c := range cases {
		srv := testserver.Redis(t, c.args...)
		d := testDriver(t, redis.NewClient(&redis.Options{Addr: srv.Addr}))
		fs, err := d.Diagnose(testCtx(t))
		if err != nil {
			t.Fatalf("%s: %v", c.what, err)
		}
		got := map[string]driver.Verdict{}
		for _, f := range fs {
			got[f.Check] = f.Verdict
			if f.Verdict != driver.VerdictOK && f.Fix == "" {
				t.Errorf("%s: %s is %s without a fix", c.what, f.Check, f.Verdict)
			}
		}
		for check, want := range c.want {
			if got[check] != want {
				t.Errorf("%s: %s = %q, want %q (%+v)", c.what, check, got[check], want, fs)
			}
		}
		_ = d.client.Close()
	}
}

// TestDiagnoseReplication: replicas without replica_sync are a warning; a
// URL pointing at a replica is unsafe.
func TestDiagnoseReplication(t *testing.T) {
	primary := testserver.Redis(t)
	replica := testserver.Redis(t, "--replicaof", "127.0.0.1", strconv.Itoa(primary.Port))
	pc := redis.NewClient(&redis.Options{Addr: primary.Addr})
	t.Cleanup(func() { _ = pc.Close() })
	ctx := testCtx(t)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		info := pc.Info(ctx, "replication").Val()
		if strings.Contains(info, "connected_slaves:1") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica never connected: %s", info)
		}
	}
	verdict := func(c redis.UniversalClient) (driver.Verdict, string) {
		fs, err := testDriver(t, c).Diagnose(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fs {
			if f.Check == "redis replication" {
				return f.Verdict, f.Detail
			}
		}
		return "", ""
	}
	if v, detail := verdict(pc); v != driver.VerdictWarn {
		t.Errorf("primary with a replica, no replica_sync: %s (%s), want warn", v, detail)
	}
	rc := redis.NewClient(&redis.Options{Addr: replica.Addr})
	t.Cleanup(func() { _ = rc.Close() })
	if v, detail := verdict(rc); v != driver.VerdictUnsafe {
		t.Errorf("URL at a replica: %s (%s), want unsafe", v, detail)
	}
}
