package filelock

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/driver"
)

// BenchmarkUncontended: acquire+release cycles on distinct names, one
// Locker shared by the goroutines (cycles/s), as shipped (sync=normal).
func BenchmarkUncontended(b *testing.B) {
	for _, g := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("goroutines=%d", g), func(b *testing.B) {
			benchUncontended(b, g, benchLocker(b, benchPath(b), false, true))
		})
	}
}

// BenchmarkUncontendedSyncFull: the same with every commit synced to disk
// (file URL key sync=full).
func BenchmarkUncontendedSyncFull(b *testing.B) {
	for _, g := range []int{1, 64} {
		b.Run(fmt.Sprintf("goroutines=%d", g), func(b *testing.B) {
			l, err := dlock.Open(context.Background(), "file://"+benchPath(b)+"?sync=full")
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			benchUncontended(b, g, l)
		})
	}
}

func benchUncontended(b *testing.B, goroutines int, l *dlock.Locker) {
	ctx := context.Background()
	var next atomic.Int64
	b.ResetTimer()
	var wg sync.WaitGroup
	for i := range goroutines {
		name := fmt.Sprintf("bench/%d", i)
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				cycle(b, ctx, l, name)
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "cycles/s")
}

func cycle(b *testing.B, ctx context.Context, l *dlock.Locker, name string) {
	ls, err := l.Acquire(ctx, name)
	if err != nil {
		b.Error(err)
		return
	}
	if err := ls.Release(ctx); err != nil {
		b.Error(err)
	}
}

// BenchmarkContended: 16 goroutines take turns on one name, pausing 1 ms
// after each release (critical sections/s; handoff = release to the next
// grant; fair = fewest turns of a goroutine / most). stores=1 is one
// process: every goroutine's Locker shares the file's store, as Open
// arranges. stores=16 gives each goroutine a private store (connection and
// release watcher), as 16 processes would have. wake=notify is the driver
// as shipped; wake=backoff hides its Notifier, leaving the portable layer's
// jittered backoff alone, for comparison.
func BenchmarkContended(b *testing.B) {
	for _, stores := range []int{1, 16} {
		for _, notify := range []bool{true, false} {
			wake := map[bool]string{true: "notify", false: "backoff"}[notify]
			b.Run(fmt.Sprintf("waiters=16/stores=%d/wake=%s", stores, wake), func(b *testing.B) {
				benchContended(b, 16, stores > 1, notify)
			})
		}
	}
}

func benchContended(b *testing.B, waiters int, private, notify bool) {
	path := benchPath(b)
	ls := make([]*dlock.Locker, waiters)
	for i := range ls {
		ls[i] = benchLocker(b, path, private, notify, dlock.WithWait(time.Minute))
	}
	h := &handoffs{turns: make([]int, waiters)}
	var next atomic.Int64
	cpu := cpuTime()
	b.ResetTimer()
	var wg sync.WaitGroup
	for i := range waiters {
		l := ls[i]
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				h.turn(b, l, i)
				time.Sleep(time.Millisecond)
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/float64(b.N), "cpu-us/cs")
	h.report(b)
}

func benchPath(b *testing.B) string { return filepath.Join(b.TempDir(), "bench.db") }

// benchLocker opens a Locker on path, on the shared store or a private one;
// without notify, its driver hides the Notifier (and every other optional
// interface).
func benchLocker(b *testing.B, path string, private, notify bool, opts ...dlock.Option) *dlock.Locker {
	d, err := openDriver(context.Background(), path, SyncNormal)
	if private {
		_ = d.Close()
		d, err = privateDriver(path, SyncNormal)
	}
	if err != nil {
		b.Fatal(err)
	}
	var drv driver.Driver = d
	if !notify {
		drv = struct{ driver.Driver }{d}
	}
	l, err := dlock.NewLocker(drv, opts...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = l.Close() })
	return l
}

// cpuTime is the process's user+system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// handoffs records the gap between one release and the next grant.
type handoffs struct {
	mu       sync.Mutex
	released time.Time
	gaps     []time.Duration
	turns    []int // critical sections per goroutine
}

func (h *handoffs) turn(b *testing.B, l *dlock.Locker, who int) {
	ctx := context.Background()
	lease, err := l.Acquire(ctx, "contended")
	if err != nil {
		b.Error(err)
		return
	}
	h.mu.Lock()
	if !h.released.IsZero() {
		h.gaps = append(h.gaps, time.Since(h.released))
	}
	h.turns[who]++
	h.released = time.Now()
	h.mu.Unlock()
	if err := lease.Release(ctx); err != nil {
		b.Error(err)
	}
}

func (h *handoffs) report(b *testing.B) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "cs/s")
	if len(h.gaps) == 0 {
		return
	}
	slices.Sort(h.gaps)
	q := func(p float64) float64 { return float64(h.gaps[int(p*float64(len(h.gaps)-1))].Microseconds()) / 1000 }
	b.ReportMetric(q(0.50), "handoff-p50-ms")
	b.ReportMetric(q(0.99), "handoff-p99-ms")
	b.ReportMetric(float64(slices.Min(h.turns))/float64(slices.Max(h.turns)), "fair-min/max")
}
