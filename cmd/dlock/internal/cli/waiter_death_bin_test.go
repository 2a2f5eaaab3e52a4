package cli

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/dlockdev/dlock/internal/rediscore"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	"github.com/go-zookeeper/zk"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// queueingBackend is a backend whose waiters queue, and a way to count
// the waiters queued on a name (the holder not counted).
type queueingBackend struct {
	name  string
	start func(t *testing.T) (url string, queued func(name string) int)
}

// queueingBackends are the backends that keep a queue of waiters: Redis's
// fair queue, Postgres lease mode, etcd and ZooKeeper.
//
// On etcd and ZooKeeper a dead waiter's place lapses with a heartbeat
// that the URL sets, not with the lock's TTL: etcd's wait lease is
// MinTTLFor(election_timeout), 2 s for the test server's 250 ms; a
// ZooKeeper waiter's node lives as long as its session, and the URL asks
// for a session timeout of zkSessionTimeout rather than the default 10 s,
// so that the killed waiter's node lapses well within the test's bound
// (a quarter of the 30 s TTL) on a loaded machine, while the holder's
// session, heartbeating every third of it, is in no danger.
var queueingBackends = []queueingBackend{
	{"redis fair queue", func(t *testing.T) (string, func(string) int) {
		s := testserver.Redis(t)
		c := redis.NewClient(&redis.Options{Addr: s.Addr})
		t.Cleanup(func() { _ = c.Close() })
		keys := rediscore.Keys{Prefix: rediscore.DefaultPrefix}
		return s.URL(), func(name string) int {
			return int(c.ZCard(context.Background(), keys.Queue(name)).Val())
		}
	}},
	{"postgres lease mode", func(t *testing.T) (string, func(string) int) {
		s := testserver.NewPostgres(t)
		if r := runBin(t, nil, "--url", s.URL(), "migrate"); r.code != 0 {
			t.Fatalf("migrate: %d %s", r.code, r.stderr)
		}
		c, err := pgx.Connect(context.Background(), s.URL())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close(context.Background()) })
		return s.URL(), func(name string) int {
			var n int
			_ = c.QueryRow(context.Background(), `SELECT cardinality(waiters) FROM dlock_leases WHERE name = $1`, name).Scan(&n)
			return n
		}
	}},
	{"etcd", func(t *testing.T) (string, func(string) int) {
		s := testserver.Etcd(t)
		c, err := clientv3.New(clientv3.Config{Endpoints: []string{s.Endpoint}, DialTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return s.URL(), func(name string) int {
			r, err := c.Get(context.Background(), "dlock/"+url.PathEscape(name)+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
			if err != nil || r.Count == 0 {
				return 0
			}
			return int(r.Count) - 1 // the holder's key
		}
	}},
	{"zookeeper", func(t *testing.T) (string, func(string) int) {
		s := testserver.ZooKeeper(t)
		c, _, err := zk.Connect([]string{s.Addr}, 10*time.Second, zk.WithLogInfo(false), zk.WithLogger(quietZK{}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return s.URL() + "?session_timeout=" + zkSessionTimeout.String(), func(name string) int {
			kids, _, err := c.Children("/dlock/" + url.PathEscape(name))
			if err != nil || len(kids) == 0 {
				return 0
			}
			return len(kids) - 1 // the holder's node
		}
	}},
}

// zkSessionTimeout is the ZooKeeper session timeout of the dlock
// processes: inside the test server's bounds (from 2 ticks of 250 ms,
// 500 ms, to 60 s).
const zkSessionTimeout = 3 * time.Second

// quietZK drops the ZooKeeper client's log lines.
type quietZK struct{}

func (quietZK) Printf(string, ...any) {}

// TestRunWaiterDeathDoesNotStallTheQueue: A holds NAME with a 30 s TTL; B
// and C wait for it (`dlock run --wait forever`), B queued first; B is
// SIGKILLed; then A's job ends and A releases. C must run well before A's
// TTL would have lapsed (a quarter of it): the dead B's place in the queue
// must not keep the lock for a TTL. The delay from A's job ending to C's
// job starting is logged (-v; DLOCK_TEST_TRIALS trials).
func TestRunWaiterDeathDoesNotStallTheQueue(t *testing.T) {
	const ttl = 30 * time.Second
	for _, b := range queueingBackends {
		t.Run(b.name, func(t *testing.T) {
			u, queued := b.start(t)
			env := []string{"DLOCK_URL=" + u}
			var delays []time.Duration
			for i := range trials() {
				delays = append(delays, waiterDeathTrial(t, env, fmt.Sprintf("waiter-death-%d", i), ttl, queued))
			}
			t.Logf("%s: A's job ended -> C's job started, B killed just before (TTL %s): %s", b.name, ttl, stats(delays))
		})
	}
}

// waiterDeathTrial runs the scenario once on name and returns how long
// after A's job was told to end C's job started.
func waiterDeathTrial(t *testing.T, env []string, name string, ttl time.Duration, queued func(string) int) time.Duration {
	t.Helper()
	dir := t.TempDir()
	file := func(f string) string { return filepath.Join(dir, f) }
	ttlFlag := ttl.String()
	var aOut, aErr, bOut, bErr, cOut, cErr syncBuffer
	a := startDlock(t, env, &aOut, &aErr, "run", "--ttl", ttlFlag, name, "--", "sh", "-c",
		`echo held > "$0/a-held"; while [ ! -e "$0/a-done" ]; do sleep 0.01; done`, dir)
	waitFile(t, file("a-held"), 30*time.Second)

	waiter := func(out, errb *syncBuffer, who string) *exec.Cmd {
		return startDlock(t, env, out, errb, "run", "--wait", "forever", "--ttl", ttlFlag, name, "--", "sh", "-c",
			`echo ran > "$0/`+who+`-ran"`, dir)
	}
	bCmd := waiter(&bOut, &bErr, "b")
	untilQueued(t, queued, name, 1, &bErr)
	cCmd := waiter(&cOut, &cErr, "c")
	untilQueued(t, queued, name, 2, &cErr)

	if err := bCmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = bCmd.Wait()
	if n := queued(name); n != 2 {
		t.Fatalf("%d waiters queued right after B died, want 2: B's place must still be in the queue when A releases", n)
	}
	if err := os.WriteFile(file("a-done"), []byte("done\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ended := time.Now()
	deadline := ended.Add(ttl + 15*time.Second) // long enough to measure the old stall
	for {
		if b, err := os.ReadFile(file("c-ran")); err == nil && len(b) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("C did not run within %s of A's job ending; A: %s C: %s", ttl+15*time.Second, aErr.String(), cErr.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	delay := time.Since(ended)
	_ = a.Wait()
	_ = cCmd.Wait()
	if code := a.ProcessState.ExitCode(); code != 0 {
		t.Errorf("A: exit %d; stderr %s", code, aErr.String())
	}
	if code := cCmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("C: exit %d; stderr %s", code, cErr.String())
	}
	if _, err := os.Stat(file("b-ran")); err == nil {
		t.Error("the killed waiter B ran its command")
	}
	if delay > ttl/4 {
		t.Errorf("C ran %s after A's job ended, want well before A's TTL %s would lapse (< %s): the killed waiter B held the queue up",
			delay.Round(time.Millisecond), ttl, ttl/4)
	}
	return delay
}

// untilQueued waits until n waiters queue on name.
func untilQueued(t *testing.T, queued func(string) int, name string, n int, errb *syncBuffer) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for queued(name) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d waiters never queued on %s (%d now); last waiter's stderr: %s", n, name, queued(name), errb.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}
