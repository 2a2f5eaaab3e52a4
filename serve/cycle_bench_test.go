package serve_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	"github.com/dlockdev/dlock/serve"
)

// BenchmarkServeCycle measures one acquire/release cycle through the HTTP
// API (a loopback server, a keep-alive client) and, beside it, the same
// cycle on the library directly: the difference is what a request costs.
// On mem:// the backend costs next to nothing, so the "http" row is the
// request path's own time and allocations; on Redis it is a real round
// trip. Run with -benchmem to see allocs/op; they count both sides of
// the connection (the client's requests too).
func BenchmarkServeCycle(b *testing.B) {
	urls := map[string]func(b *testing.B) string{
		"mem":   func(*testing.B) string { return fmt.Sprintf("mem://bench-%d", time.Now().UnixNano()) }, // one store per name
		"redis": func(b *testing.B) string { return testserver.Redis(b).URL() },
	}
	for _, name := range []string{"mem", "redis"} {
		b.Run(name, func(b *testing.B) {
			url := urls[name](b)
			b.Run("library", func(b *testing.B) { benchLibraryCycle(b, benchLocker(b, url)) })
			b.Run("http", func(b *testing.B) { benchHTTPCycle(b, benchLocker(b, url), 1) })
			b.Run("http-parallel", func(b *testing.B) { benchHTTPCycle(b, benchLocker(b, url), 16) })
		})
	}
}

// benchLocker opens a Locker on url for one run of a benchmark: a
// Server adds its hooks to its Locker for good, so a Locker shared by
// the runs would feed every earlier run's Server too.
func benchLocker(b *testing.B, url string) *dlock.Locker {
	l, err := dlock.Open(context.Background(), url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = l.Close() })
	return l
}

// benchLibraryCycle is TryAcquire then Release on l.
func benchLibraryCycle(b *testing.B, l *dlock.Locker) {
	ctx := context.Background()
	b.ReportAllocs()
	defer reportCPU(b)()
	for b.Loop() {
		ls, err := l.TryAcquire(ctx, "bench-lib", dlock.WithTTL(10*time.Second))
		if err != nil {
			b.Fatal(err)
		}
		if err := ls.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// benchHTTPCycle is POST acquire (wait_ms 0) then DELETE the lease, by
// clients goroutines at once, each on its own name.
func benchHTTPCycle(b *testing.B, l *dlock.Locker, clients int) {
	srv, err := serve.New(serve.Config{Locker: l, Tokens: []string{clientTok}, AdminTokens: []string{adminTok},
		RatePerSecond: 1e9, Burst: 1 << 30})
	if err != nil {
		b.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	tr := &http.Transport{DialContext: (&net.Dialer{}).DialContext, MaxIdleConnsPerHost: 2 * clients, DisableCompression: true}
	hc := &http.Client{Transport: tr}
	b.Cleanup(func() {
		_ = srv.Close()
		tr.CloseIdleConnections()
		ts.Close()
	})
	b.SetParallelism(max(1, clients/runtime.GOMAXPROCS(0)))
	b.ReportAllocs()
	b.ResetTimer()
	defer reportCPU(b)()
	var n atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		name := fmt.Sprintf("bench-http-%d-%d", clients, n.Add(1))
		body, _ := json.Marshal(map[string]any{"ttl_ms": 10000, "wait_ms": 0, "owner": name})
		for pb.Next() {
			httpCycle(b, hc, ts.URL, name, body)
		}
	})
}

// httpCycle acquires name through the API and releases the lease.
func httpCycle(b *testing.B, hc *http.Client, base, name string, body []byte) {
	var ls struct {
		ID string `json:"lease_id"`
	}
	if code := benchDo(b, hc, http.MethodPost, base+"/v1/locks/"+name+"/acquire", body, &ls); code != http.StatusOK {
		b.Errorf("acquire: status %d", code)
		return
	}
	if code := benchDo(b, hc, http.MethodDelete, base+"/v1/leases/"+ls.ID, nil, nil); code != http.StatusNoContent {
		b.Errorf("release: status %d", code)
	}
}

func benchDo(b *testing.B, hc *http.Client, method, url string, body []byte, out any) int {
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+clientTok)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		b.Error(err)
		return 0
	}
	defer resp.Body.Close()
	if out != nil {
		_ = json.NewDecoder(resp.Body).Decode(out)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// reportCPU starts counting the process's CPU time (user and system, every
// goroutine: the client's, the server's, the driver's) and returns the
// function that reports it per operation as cpu-µs/op.
func reportCPU(b *testing.B) func() {
	start := cpuTime()
	return func() { b.ReportMetric(float64((cpuTime()-start).Microseconds())/float64(b.N), "cpu-µs/op") }
}

// cpuTime is the CPU time the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkHTTPFloor is BenchmarkServeCycle's http-parallel cycle against
// a handler that does nothing but answer: what net/http's server and
// client cost by themselves on this machine, the floor under the API's
// cycle.
func BenchmarkHTTPFloor(b *testing.B) {
	lease := []byte(`{"lease_id":"0123456789abcdef0123456789abcdef","name":"x","fence":1}`)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.Method == http.MethodDelete {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(lease)
	}))
	tr := &http.Transport{DialContext: (&net.Dialer{}).DialContext, MaxIdleConnsPerHost: 32, DisableCompression: true}
	hc := &http.Client{Transport: tr}
	b.Cleanup(func() {
		tr.CloseIdleConnections()
		ts.Close()
	})
	body, _ := json.Marshal(map[string]any{"ttl_ms": 10000, "wait_ms": 0, "owner": "floor"})
	b.SetParallelism(max(1, 16/runtime.GOMAXPROCS(0)))
	b.ReportAllocs()
	defer reportCPU(b)()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			httpCycle(b, hc, ts.URL, "floor", body)
		}
	})
}
