package redlock

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
	"github.com/redis/go-redis/v9"
)

// The benchmarks run over 5 redis-servers, with quorum fencing on (one
// round trip while the nodes' counters agree, two when phase 2 is needed)
// and off (always one round trip). Node timeout: the default 50 ms.

var fencingModes = []struct {
	name string
	on   bool
}{{"fencing=on", true}, {"fencing=off", false}}

// BenchmarkUncontended: acquire+release on distinct names from 1, 16 and
// 64 goroutines sharing one Locker, and the same with a hand-written
// redsync-style baseline (parallel SET NX PX on every node, majority,
// then a parallel token-checked DEL; no fencing, watchdog or waiting) on
// the same clients, so that both are measured under the same load.
// Reports cycles per second, the p50/p99 of one cycle and the share of
// cycles that failed (a node timeout on a loaded machine).
func BenchmarkUncontended(b *testing.B) {
	ns := startNodes(b, 5)
	cs := ns.clients(b)
	for _, mode := range fencingModes {
		l, err := New(cs, WithFencing(mode.on))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = l.Close() })
		for _, g := range []int{1, 16, 64} {
			b.Run(fmt.Sprintf("%s/goroutines=%d", mode.name, g), func(b *testing.B) {
				d := l.Driver().(*redlock)
				before := d.phase2s.Load()
				runCycles(b, g, dlockCycle(l))
				b.ReportMetric(float64(d.phase2s.Load()-before)/float64(b.N), "phase2/op")
			})
		}
	}
	for _, g := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("baseline/goroutines=%d", g), func(b *testing.B) {
			runCycles(b, g, baselineCycle(cs))
		})
	}
}

type cycle func(ctx context.Context, name string) error

func dlockCycle(l *dlock.Locker) cycle {
	return func(ctx context.Context, name string) error {
		ls, err := l.TryAcquire(ctx, name, dlock.WithTTL(10*time.Second), dlock.WithAutoRefresh(false))
		if err != nil {
			return err
		}
		return ls.Release(ctx)
	}
}

var baselineDel = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`)

// baselineCycle is redsync's algorithm, written out: parallel SET NX PX
// with a 50 ms timeout per node, a majority and validity check, then a
// parallel token-checked DEL.
func baselineCycle(cs []redis.UniversalClient) cycle {
	each := func(ctx context.Context, fn func(ctx context.Context, c redis.UniversalClient) bool) int {
		var n atomic.Int64
		var wg sync.WaitGroup
		for _, c := range cs {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(ctx, DefaultNodeTimeout)
				defer cancel()
				if fn(ctx, c) {
					n.Add(1)
				}
			})
		}
		wg.Wait()
		return int(n.Load())
	}
	return func(ctx context.Context, name string) error {
		key, tok := "baseline:"+name, newBenchToken()
		del := func(ctx context.Context, c redis.UniversalClient) bool {
			return baselineDel.Run(ctx, c, []string{key}, tok).Err() == nil
		}
		start := time.Now()
		n := each(ctx, func(ctx context.Context, c redis.UniversalClient) bool {
			ok, err := c.SetNX(ctx, key, tok, 10*time.Second).Result()
			return err == nil && ok
		})
		if n < len(cs)/2+1 || time.Since(start) > 10*time.Second-drift(10*time.Second) {
			each(ctx, del)
			return fmt.Errorf("baseline: %d of %d nodes granted", n, len(cs))
		}
		each(ctx, del)
		return nil
	}
}

// runCycles spreads b.N cycles over g goroutines, each on its own name.
func runCycles(b *testing.B, g int, fn cycle) {
	ctx := context.Background()
	var left atomic.Int64
	left.Store(int64(b.N))
	lat := make([][]time.Duration, g)
	var failed atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for i := range g {
		name := fmt.Sprintf("bench/%s/%s/%d", b.Name(), newBenchToken(), i)
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				t0 := time.Now()
				if err := fn(ctx, name); err != nil {
					// A node timeout on a loaded machine: counted, not fatal.
					if failed.Add(1) <= 3 {
						b.Log(err)
					}
					continue
				}
				lat[i] = append(lat[i], time.Since(t0))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	all := slices.Concat(lat...)
	b.ReportMetric(float64(b.N-int(failed.Load()))/elapsed.Seconds(), "ops/s")
	b.ReportMetric(float64(failed.Load())/float64(b.N), "failed/op")
	b.ReportMetric(ms(pct(all, 50)), "cycle-p50-ms")
	b.ReportMetric(ms(pct(all, 99)), "cycle-p99-ms")
}

// BenchmarkContended: 16 goroutines on one name, each pausing 1 ms after
// its release; each goroutine has its own Locker (as separate processes
// would) over its own 5 clients. Reports critical sections per second,
// the handoff time (release to the next grant) and the wait per acquire.
func BenchmarkContended(b *testing.B) {
	ns := startNodes(b, 5)
	for _, mode := range fencingModes {
		b.Run(mode.name, func(b *testing.B) {
			const workers = 16
			lockers := make([]*dlock.Locker, workers)
			for i := range lockers {
				lockers[i] = ns.locker(b, WithFencing(mode.on))
			}
			r := &contention{name: "bench/contended/" + newBenchToken()}
			var left atomic.Int64
			left.Store(int64(b.N))
			counts := make([]int, workers)
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			for i, l := range lockers {
				wg.Go(func() { counts[i] = r.work(b, l, &left) })
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			r.report(b, elapsed, counts)
		})
	}
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

func newBenchToken() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
