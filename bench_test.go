package dlock_test

import (
	"context"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/dlockdev/dlock/memlock"
)

// BenchmarkPortableCycle measures what the portable layer adds to one
// TryAcquire+Release, on the in-process driver (whose own cost is a map
// update), with 1 and 64 goroutines on distinct names and a background of
// held leases the watchdog keeps.
func BenchmarkPortableCycle(b *testing.B) {
	for _, g := range []int{1, 64} {
		b.Run("goroutines="+strconv.Itoa(g), func(b *testing.B) {
			l, err := memlock.New(memlock.NewStore())
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			ctx := context.Background()
			for i := range 1000 { // leases the watchdog keeps meanwhile
				if _, err := l.TryAcquire(ctx, "held"+strconv.Itoa(i)); err != nil {
					b.Fatal(err)
				}
			}
			var next atomic.Int64
			b.SetParallelism(max(1, g/runtime.GOMAXPROCS(0)))
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				name := "n" + strconv.FormatInt(next.Add(1), 10)
				for pb.Next() {
					ls, err := l.TryAcquire(ctx, name)
					if err != nil {
						b.Error(err)
						return
					}
					if err := ls.Release(ctx); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
