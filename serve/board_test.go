package serve_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	"github.com/dlockdev/dlock/serve"
)

// viewers opens n dashboard streams, each reading and dropping what the
// server sends, and returns once each has received its first snapshot.
func viewers(t *testing.T, base string, n int) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	ready := make(chan error, n)
	for range n {
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(ctx, "GET", base+"/v1/dashboard/stream", nil)
			req.Header.Set("Authorization", "Bearer "+clientTok)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				ready <- err
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode != 200 {
				ready <- fmt.Errorf("status %d", resp.StatusCode)
				return
			}
			br := bufio.NewReaderSize(resp.Body, 1<<16)
			for {
				line, err := br.ReadString('\n')
				if err != nil {
					ready <- err
					return
				}
				if line == "event: snapshot\n" {
					break
				}
			}
			ready <- nil
			_, _ = io.Copy(io.Discard, br)
		})
	}
	for range n {
		if err := <-ready; err != nil {
			cancel()
			wg.Wait()
			t.Fatalf("a dashboard stream: %v", err)
		}
	}
	return func() { cancel(); wg.Wait() }
}

// commandsPerSecond measures the Redis server's command rate over d.
func commandsPerSecond(t *testing.T, rdb *redis.Client, d time.Duration) float64 {
	t.Helper()
	count := func() int64 {
		info, err := rdb.Info(context.Background(), "stats").Result()
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(info) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "total_commands_processed:"); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				return n
			}
		}
		t.Fatal("INFO stats has no total_commands_processed")
		return 0
	}
	start, t0 := count(), time.Now()
	time.Sleep(d)
	end := count()
	return float64(end-start-1) / time.Since(t0).Seconds()
}

// TestDashboardViewersShareOneListing: on Redis with 300 locks held and a
// lock taken and released every 500 ms, 500 dashboard viewers cost the
// backend at most 1.2 times the commands per second of one viewer: the
// snapshot is built once for all of them.
func TestDashboardViewersShareOneListing(t *testing.T) {
	rs := testserver.Redis(t)
	e := newEnv(t, rs.URL(), func(c *serve.Config) {
		c.RatePerSecond, c.Burst, c.MaxDashboardStreams = 1e6, 1e6, 1000
	})
	opt, _ := redis.ParseURL(rs.URL())
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	ctx := context.Background()
	var held []*dlock.Lease
	for i := range 300 {
		ls, err := e.locker.Acquire(ctx, fmt.Sprintf("held-%03d", i), dlock.WithTTL(time.Minute), dlock.WithOwner(fmt.Sprintf("worker/%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, ls)
	}
	defer func() { _ = dlock.ReleaseAll(ctx, held) }()
	churn, stopChurn := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stopChurn()
	wg.Go(func() {
		for churn.Err() == nil {
			if ls, err := e.locker.Acquire(churn, "churn", dlock.WithWait(0)); err == nil {
				_ = ls.Release(ctx)
			}
			select {
			case <-churn.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
	})
	const window = 8 * time.Second
	idle := commandsPerSecond(t, rdb, window)
	rate := map[int]float64{}
	for _, n := range []int{1, 500} {
		stop := viewers(t, e.url, n)
		time.Sleep(time.Second)
		rate[n] = commandsPerSecond(t, rdb, window)
		stop()
	}
	t.Logf("Redis commands/s with 300 locks held and a grant and release every 500 ms: %.0f with no viewer, %.0f with 1, %.0f with 500 (%.2fx)",
		idle, rate[1], rate[500], rate[500]/rate[1])
	if rate[500] > 1.2*rate[1] {
		t.Errorf("500 dashboard viewers cost Redis %.0f commands/s, one viewer %.0f: %.1fx, want at most 1.2x", rate[500], rate[1], rate[500]/rate[1])
	}
}

// TestDashboardStreamsCappedPerClient: one client has at most
// MaxDashboardStreams dashboard streams open; the next is 429 with
// Retry-After while polls are still served, and a closed stream's place
// is taken again.
func TestDashboardStreamsCappedPerClient(t *testing.T) {
	e := newEnv(t, "mem://stream-cap", func(c *serve.Config) { c.MaxDashboardStreams = 3 })
	var stops []func()
	for range 3 {
		_, stop := e.stream("/v1/dashboard/stream")
		stops = append(stops, stop)
	}
	defer func() {
		for _, stop := range stops {
			stop()
		}
	}()
	if code, retry := streamStatus(t, e.url); code != 429 || retry == "" {
		t.Errorf("a 4th dashboard stream of one token with MaxDashboardStreams 3: %d (Retry-After %q), want 429 with Retry-After", code, retry)
	}
	var snap map[string]any
	if code, _ := e.call("GET", "/v1/dashboard", clientTok, nil, &snap); code != 200 || snap["holders"] == nil {
		t.Errorf("a poll of the dashboard with the streams at their bound: %d %v, want 200", code, snap)
	}
	stops[0]()
	stops = stops[1:]
	deadline := time.Now().Add(5 * time.Second)
	for {
		code, _ := streamStatus(t, e.url)
		if code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a stream after one of the 3 closed: %d for 5 s, want 200", code)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// streamStatus opens a dashboard stream, and closes it once it has its
// status and Retry-After.
func streamStatus(t *testing.T, base string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/v1/dashboard/stream", nil)
	req.Header.Set("Authorization", "Bearer "+clientTok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Retry-After")
}
