package redlock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/internal/benchwork"
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
		l, err := Config{NoFencing: !mode.on}.Locker(cs)
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

func dlockCycle(l *dlock.Locker) benchwork.Cycle {
	return benchwork.AcquireRelease(l, dlock.WithTTL(10*time.Second), dlock.WithAutoRefresh(false), dlock.WithWait(0))
}

var baselineDel = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`)

// baselineCycle is redsync's algorithm, written out: parallel SET NX PX
// with a 50 ms timeout per node, a majority and validity check, then a
// parallel token-checked DEL.
func baselineCycle(cs []redis.UniversalClient) benchwork.Cycle {
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
		if n < len(cs)/2+1 || time.Since(start) > 10*time.Second-driver.ClockDrift(10*time.Second) {
			each(ctx, del)
			return fmt.Errorf("baseline: %d of %d nodes granted", n, len(cs))
		}
		each(ctx, del)
		return nil
	}
}

// runCycles spreads b.N cycles over g goroutines, each on its own name; a
// failed cycle (a node timeout on a loaded machine) is counted, not fatal.
func runCycles(b *testing.B, g int, fn benchwork.Cycle) {
	r := benchwork.UncontendedLossy(b, g, fmt.Sprintf("bench/%s/%s/", b.Name(), newBenchToken()), fn)
	r.ReportRate(b, "ops/s")
	r.ReportFailures(b)
	r.ReportLatencies(b)
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
				lockers[i] = ns.locker(b, Config{NoFencing: !mode.on})
			}
			benchwork.Contended(b, workers, benchwork.Acquire(lockers, "bench/contended/"+newBenchToken(),
				dlock.WithTTL(5*time.Second), dlock.WithWait(time.Minute))).Report(b)
		})
	}
}

func newBenchToken() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
