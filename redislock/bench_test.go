package redislock_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/internal/benchwork"
	"github.com/dlockdev/dlock/internal/testserver"
	"github.com/dlockdev/dlock/redislock"
	"github.com/redis/go-redis/v9"
)

// baselineRelease is the hand-written token-checked DEL of the baseline.
var baselineRelease = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`)

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
		fn   benchwork.Cycle
	}{
		{"dlock", dlockCycle(l)},
		{"dlock-fair", dlockCycle(fair)},
		{"baseline", baselineCycle(c)},
	}
	for _, g := range []int{1, 16, 64} {
		for _, impl := range impls {
			b.Run(fmt.Sprintf("%s/goroutines=%d", impl.name, g), func(b *testing.B) {
				benchwork.Uncontended(b, g, "bench/"+b.Name()+"/", impl.fn).ReportRate(b, "ops/s")
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
			fns := []benchwork.Cycle{dlockCycle(l), baselineCycle(c)}
			var spent [2]time.Duration
			var done [2]int
			for round := 0; done[0] < b.N; round++ {
				for k := range 2 {
					i := (round + k) % 2
					start := time.Now()
					benchwork.Run(b, 500, g, "ratio/", fns[i])
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

func dlockCycle(l *dlock.Locker) benchwork.Cycle {
	return benchwork.AcquireRelease(l, dlock.WithTTL(10*time.Second), dlock.WithAutoRefresh(false))
}

func baselineCycle(c redis.UniversalClient) benchwork.Cycle {
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
	benchwork.Contended(b, workers, benchwork.Acquire(lockers, "bench/contended/"+newToken(),
		dlock.WithTTL(5*time.Second), dlock.WithWait(time.Minute))).Report(b)
}
