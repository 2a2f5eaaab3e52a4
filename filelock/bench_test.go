package filelock

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/internal/benchwork"
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
	benchwork.Uncontended(b, goroutines, "bench/", benchwork.AcquireRelease(l)).ReportRate(b, "cycles/s")
}

// BenchmarkContended: 16 goroutines take turns on one name, pausing 1 ms
// after each release (critical sections/s; handoff = release to the next
// grant; fair = fewest turns of a goroutine / most). stores=1 is one
// process: every goroutine's Locker shares the file's store, as New
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
	cpu := cpuTime()
	c := benchwork.Contended(b, waiters, benchwork.Acquire(ls, "contended"))
	b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/float64(b.N), "cpu-us/cs")
	c.ReportRate(b)
	if len(c.Handoffs) == 0 {
		return
	}
	c.ReportHandoffs(b)
	c.ReportFairness(b)
}

func benchPath(b *testing.B) string { return filepath.Join(b.TempDir(), "bench.db") }

// benchLocker opens a Locker on path, on the shared store or a private one;
// without notify, its driver hides the Notifier (and every other optional
// interface).
func benchLocker(b *testing.B, path string, private, notify bool, opts ...dlock.Option) *dlock.Locker {
	d, err := openDriver(context.Background(), path, Config{Sync: SyncNormal, Retention: DefaultRetention})
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
