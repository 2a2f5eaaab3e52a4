package chaos

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

// s9Size is the scenario's 10,000 leases for 60 s (the short run: 500 for 4 s).
func s9Size() (n int, hold time.Duration) {
	if fullRun() {
		return 10_000, 60 * time.Second
	}
	return 500, 4 * time.Second
}

// TestS9ManyLeases holds many leases on one Locker, refreshed by its
// watchdog, and checks that none is lost. It measures the refresh traffic
// the server sees while they are held (Redis commands, Postgres
// transactions, etcd gRPC messages), and how long acquiring and releasing
// them all (Locker.Close) take.
func TestS9ManyLeases(t *testing.T) {
	pg := testserver.Postgres(t)
	rs := testserver.Redis(t)
	et := testserver.Etcd(t)
	cases := []struct {
		b       backend
		traffic func(t *testing.T) (float64, string)
	}{
		{redisBackend(t, rs), redisCommands(rs.Addr)},
		{pgBackend(t, pg, "lease"), nil},
		{etcdBackend(t, et.URL()), etcdMessages(et.Endpoint)},
	}
	for i, c := range cases {
		if !fullRun() && i == 2 {
			continue // etcd's whole-second TTLs need a longer hold than the short run has
		}
		t.Run(c.b.Name, func(t *testing.T) {
			traffic := c.traffic
			if traffic == nil {
				traffic = pgTransactions(c.b.URL)
			}
			s9Case(t, c.b, traffic)
		})
	}
}

func s9Case(t *testing.T, b backend, traffic func(t *testing.T) (float64, string)) {
	n, hold := s9Size()
	ttl := max(b.TTL, 2*time.Second)
	row := Row{Scenario: fmt.Sprintf("S9 %d leases on one Locker held %s: lost", n, hold), Backend: b.Name,
		Expect: ExpectSafe, Trials: 1, Unlinearizable: -1, Metric: "release all (Close)"}
	ctx := context.Background()
	l, err := dlock.Open(ctx, b.URL, dlock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	leases := acquireMany(t, l, n)
	acquired := time.Since(start)
	before, unit := traffic(t)
	time.Sleep(hold)
	after, _ := traffic(t)
	lost, why := lostReasons(leases)
	start = time.Now()
	if err := l.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	row.Timings = []time.Duration{time.Since(start)}
	row.Violations = lost
	rate := (after - before) / hold.Seconds()
	row.Note = fmt.Sprintf("%sTTL %s; acquire all %s; refresh traffic %.0f %s/s = %.3f per lease per second (one refresh per lease per TTL/3 would be %.3f)",
		why, ttl, acquired.Round(time.Millisecond), rate, unit, rate/float64(n), 3/ttl.Seconds())
	report(t, row)
}

// lostReasons counts the leases that ended and says why, e.g.
// "lost: 12 expired, 3 no refresh confirmed in time (first: ...); ".
func lostReasons(leases []*dlock.Lease) (int, string) {
	counts := map[string]int{}
	var first error
	lost := 0
	for _, ls := range leases {
		err := ls.Err()
		if err == nil {
			continue
		}
		lost++
		if first == nil {
			first = err
		}
		reason := err.Error()
		var le *dlock.LostError
		if errors.As(err, &le) {
			reason = le.Reason
		}
		counts[reason]++
	}
	if lost == 0 {
		return 0, ""
	}
	var parts []string
	for r, c := range counts {
		parts = append(parts, fmt.Sprintf("%d %s", c, r))
	}
	sort.Strings(parts)
	return lost, fmt.Sprintf("lost: %s (first: %v); ", strings.Join(parts, ", "), first)
}

// acquireMany takes n distinct names on l, 64 at a time.
func acquireMany(t *testing.T, l *dlock.Locker, n int) []*dlock.Lease {
	t.Helper()
	leases := make([]*dlock.Lease, n)
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	prefix := lockName("s9", 0)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			ls, err := l.Acquire(context.Background(), fmt.Sprintf("%s/%d", prefix, i), dlock.WithWait(time.Minute))
			mu.Lock()
			defer mu.Unlock()
			if err != nil && firstErr == nil {
				firstErr = err
			}
			leases[i] = ls
		}()
	}
	wg.Wait()
	if firstErr != nil {
		t.Fatalf("acquire: %v", firstErr)
	}
	return leases
}

// redisCommands counts the scripts (EVALSHA/EVAL: one round trip each,
// a batched refresh is one) the server ran; the note also gives the
// commands those scripts issued.
func redisCommands(addr string) func(t *testing.T) (float64, string) {
	return func(t *testing.T) (float64, string) {
		c := redis.NewClient(&redis.Options{Addr: addr})
		defer c.Close()
		cs, err := c.Info(context.Background(), "commandstats").Result()
		if err != nil {
			t.Fatal(err)
		}
		return cmdCalls(cs, "evalsha") + cmdCalls(cs, "eval"), "scripts (round trips)"
	}
}

// cmdCalls reads calls= of cmdstat_<cmd> from INFO commandstats.
func cmdCalls(info, cmd string) float64 {
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "cmdstat_"+cmd+":calls="); ok {
			n, _, _ := strings.Cut(v, ",")
			f, _ := strconv.ParseFloat(n, 64)
			return f
		}
	}
	return 0
}

func pgTransactions(rawURL string) func(t *testing.T) (float64, string) {
	return func(t *testing.T) (float64, string) {
		u, _ := url.Parse(rawURL)
		q := u.Query()
		q.Del("mode")
		u.RawQuery = q.Encode()
		ctx := context.Background()
		c, err := pgx.Connect(ctx, u.String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(ctx)
		var n float64
		// The statistics are cached per transaction; clear them first.
		_, _ = c.Exec(ctx, "SELECT pg_stat_clear_snapshot()")
		if err := c.QueryRow(ctx, `SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n, "transactions"
	}
}

// etcdMessages sums the gRPC messages the member received, from its
// Prometheus endpoint on the client port.
func etcdMessages(endpoint string) func(t *testing.T) (float64, string) {
	return func(t *testing.T) (float64, string) {
		resp, err := http.Get("http://" + endpoint + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var sum float64
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, "grpc_server_msg_received_total{") {
				f := strings.Fields(line)
				v, _ := strconv.ParseFloat(f[len(f)-1], 64)
				sum += v
			}
		}
		return sum, "gRPC messages"
	}
}
