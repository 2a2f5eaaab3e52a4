package redislock_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/internal/testserver"
	"github.com/dlockdev/dlock/redislock"
	"github.com/redis/go-redis/v9"
)

// baselineRelease is the hand-written token-checked DEL of the baseline.
var baselineRelease = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`)

// cycle is one uncontended acquire+release on name.
type cycle func(ctx context.Context, name string) error

// BenchmarkUncontended: acquire+release on distinct names from 1, 16 and 64
// goroutines, for dlock and for the 1-round-trip baseline (SET NX PX, then
// a token-checked DEL script) on the same client.
func BenchmarkUncontended(b *testing.B) {
	srv := testserver.Redis(b)
	c := client(b, srv.Addr)
	l := locker(b, c)
	b.Cleanup(func() { _ = l.Close() })
	fair := locker(b, c, redislock.WithFairQueue(true))
	b.Cleanup(func() { _ = fair.Close() })
	impls := []struct {
		name string
		fn   cycle
	}{
		{"dlock", dlockCycle(l)},
		{"dlock-fair", dlockCycle(fair)},
		{"baseline", baselineCycle(c)},
	}
	for _, g := range []int{1, 16, 64} {
		for _, impl := range impls {
			b.Run(fmt.Sprintf("%s/goroutines=%d", impl.name, g), func(b *testing.B) {
				runCycles(b, g, impl.fn)
			})
		}
	}
}

// BenchmarkUncontendedRatio measures dlock and the baseline in alternating
// rounds of 500 cycles each, so that load from other processes on the
// machine hits both alike; it reports both rates and their ratio.
func BenchmarkUncontendedRatio(b *testing.B) {
	srv := testserver.Redis(b)
	c := client(b, srv.Addr)
	l := locker(b, c)
	b.Cleanup(func() { _ = l.Close() })
	for _, g := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("goroutines=%d", g), func(b *testing.B) {
			fns := []cycle{dlockCycle(l), baselineCycle(c)}
			var spent [2]time.Duration
			var done [2]int
			for round := 0; done[0] < b.N; round++ {
				for k := range 2 {
					i := (round + k) % 2
					start := time.Now()
					cyclesOn(b, g, 500, fns[i])
					spent[i] += time.Since(start)
					done[i] += 500
				}
			}
			dl, base := float64(done[0])/spent[0].Seconds(), float64(done[1])/spent[1].Seconds()
			b.ReportMetric(dl, "dlock-ops/s")
			b.ReportMetric(base, "baseline-ops/s")
			b.ReportMetric(dl/base, "ratio")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// cyclesOn runs n cycles spread over g goroutines, each on its own name.
func cyclesOn(b *testing.B, g, n int, fn cycle) {
	ctx := context.Background()
	var left atomic.Int64
	left.Store(int64(n))
	var wg sync.WaitGroup
	for i := range g {
		name := fmt.Sprintf("ratio/%d", i)
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				if err := fn(ctx, name); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

func dlockCycle(l *dlock.Locker) cycle {
	return func(ctx context.Context, name string) error {
		ls, err := l.Acquire(ctx, name, dlock.WithTTL(10*time.Second), dlock.WithAutoRefresh(false))
		if err != nil {
			return err
		}
		return ls.Release(ctx)
	}
}

func baselineCycle(c redis.UniversalClient) cycle {
	return func(ctx context.Context, name string) error {
		tok := newToken()
		ok, err := c.SetNX(ctx, "base:"+name, tok, 10*time.Second).Result()
		if err != nil || !ok {
			return fmt.Errorf("baseline acquire: %v %v", ok, err)
		}
		return baselineRelease.Run(ctx, c, []string{"base:" + name}, tok).Err()
	}
}

func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// runCycles spreads b.N cycles over g goroutines, each on its own name.
func runCycles(b *testing.B, g int, fn cycle) {
	ctx := context.Background()
	var left atomic.Int64
	left.Store(int64(b.N))
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for i := range g {
		name := fmt.Sprintf("bench/%s/%d", b.Name(), i)
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				if err := fn(ctx, name); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "ops/s")
}

// BenchmarkContended: 16 goroutines on one name, each pausing 1 ms after
// its release, on one shared client; with 16 Lockers (as separate
// processes would have) or one shared Locker, in the default mode (waiters
// race for each release) and with WithFairQueue. Reports critical sections per second, the
// handoff time (release to the next grant) and the wait per acquire.
func BenchmarkContended(b *testing.B) {
	srv := testserver.Redis(b)
	c := client(b, srv.Addr)
	fair := redislock.WithFairQueue(true)
	b.Run("lockers=16/mode=race", func(b *testing.B) { contended(b, c, 16) })
	b.Run("lockers=16/mode=fair", func(b *testing.B) { contended(b, c, 16, fair) })
	b.Run("lockers=1/mode=race", func(b *testing.B) { contended(b, c, 1) })
	b.Run("lockers=1/mode=fair", func(b *testing.B) { contended(b, c, 1, fair) })
}

// contended runs 16 workers on n Lockers (16: one each, like separate
// processes; 1: all share one Locker and its subscription).
func contended(b *testing.B, c redis.UniversalClient, n int, opts ...redislock.Option) {
	const workers = 16
	lockers := make([]*dlock.Locker, workers)
	for i := range lockers {
		if i < n {
			lockers[i] = locker(b, c, opts...)
			b.Cleanup(func() { _ = lockers[i].Close() })
		} else {
			lockers[i] = lockers[i%n]
		}
	}
	r := &contention{name: "bench/contended/" + newToken()}
	b.ResetTimer()
	start := time.Now()
	var left atomic.Int64
	left.Store(int64(b.N))
	var wg sync.WaitGroup
	counts := make([]int, workers)
	for i, l := range lockers {
		wg.Go(func() { counts[i] = r.work(b, l, &left) })
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	r.report(b, elapsed, counts)
}

type contention struct {
	name string

	mu       sync.Mutex
	released time.Time // when the last holder released; zero after a grant
	handoffs []time.Duration
	waits    []time.Duration
}

func (r *contention) work(b *testing.B, l *dlock.Locker, left *atomic.Int64) int {
	ctx := context.Background()
	n := 0
	for left.Add(-1) >= 0 {
		t0 := time.Now()
		ls, err := l.Acquire(ctx, r.name, dlock.WithTTL(5*time.Second), dlock.WithWait(time.Minute))
		if err != nil {
			b.Error(err)
			return n
		}
		r.granted(time.Since(t0))
		n++
		r.mu.Lock()
		r.released = time.Now()
		r.mu.Unlock()
		if err := ls.Release(ctx); err != nil {
			b.Error(err)
			return n
		}
		time.Sleep(time.Millisecond)
	}
	return n
}

func (r *contention) granted(wait time.Duration) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.waits = append(r.waits, wait)
	if !r.released.IsZero() {
		r.handoffs = append(r.handoffs, now.Sub(r.released))
		r.released = time.Time{}
	}
}

func (r *contention) report(b *testing.B, elapsed time.Duration, counts []int) {
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "cs/s")
	b.ReportMetric(ms(pct(r.handoffs, 50)), "handoff-p50-ms")
	b.ReportMetric(ms(pct(r.handoffs, 99)), "handoff-p99-ms")
	b.ReportMetric(ms(pct(r.waits, 50)), "wait-p50-ms")
	b.ReportMetric(ms(pct(r.waits, 99)), "wait-p99-ms")
	lo, hi := slices.Min(counts), slices.Max(counts)
	if hi > 0 {
		b.ReportMetric(float64(lo)/float64(hi), "fair-min/max")
	}
	b.ReportMetric(0, "ns/op")
}

func pct(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
