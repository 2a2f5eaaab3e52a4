package redislock

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	"github.com/redis/go-redis/v9"
)

// BenchmarkDriverCycle is the driver alone (no portable layer): one
// acquire script and one release script per cycle, next to the raw
// baseline (SET NX PX + INCR in one pipeline, DEL script) and the whole
// Locker on the same client, alternating. The gap between locker-ops/s
// and driver-ops/s is the portable layer's cost.
func BenchmarkDriverCycle(b *testing.B) {
	srv := testserver.Redis(b)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
	b.Cleanup(func() { _ = c.Close() })
	cfg := defaultConfig()
	cfg.logger = slog.New(slog.DiscardHandler)
	d := newDriver(c, cfg, false)
	d.prepare()
	b.Cleanup(func() { _ = d.Close() })
	ctx := context.Background()
	del := redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)
	l, err := newLocker(newDriver(c, cfg, false), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = l.Close() })
	var spent [3]time.Duration
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		ls, err := l.Acquire(ctx, "lock", dlock.WithTTL(10*time.Second))
		if err != nil {
			b.Fatal(err)
		}
		if err := ls.Release(ctx); err != nil {
			b.Fatal(err)
		}
		spent[2] += time.Since(t0)
		start := time.Now()
		req := driver.Request{Name: "drv", Token: "tok", Owner: "me", TTL: 10 * time.Second}
		if _, err := d.TryAcquire(ctx, req); err != nil {
			b.Fatal(err)
		}
		if err := d.Release(ctx, "drv", "tok"); err != nil {
			b.Fatal(err)
		}
		mid := time.Now()
		if _, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			p.SetNX(ctx, "base", "tok", 10*time.Second)
			p.Incr(ctx, "base:fence")
			return nil
		}); err != nil {
			b.Fatal(err)
		}
		if err := del.Run(ctx, c, []string{"base"}, "tok").Err(); err != nil {
			b.Fatal(err)
		}
		spent[0] += mid.Sub(start)
		spent[1] += time.Since(mid)
	}
	b.ReportMetric(float64(b.N)/spent[0].Seconds(), "driver-ops/s")
	b.ReportMetric(float64(b.N)/spent[1].Seconds(), "baseline-ops/s")
	b.ReportMetric(float64(b.N)/spent[2].Seconds(), "locker-ops/s")
}
