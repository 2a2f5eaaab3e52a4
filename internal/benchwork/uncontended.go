package benchwork

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Cycles is the outcome of a run of uncontended cycles.
type Cycles struct {
	// N is how many cycles were due; Failed how many returned an error.
	N, Failed int
	// Elapsed is the run's wall time.
	Elapsed time.Duration
	// Latencies holds the duration of every successful cycle.
	Latencies []time.Duration
}

// Uncontended resets b's timer and spreads b.N cycles over workers
// goroutines, worker i on Name(prefix, i). A failing cycle is reported
// with b.Error and stops its worker.
func Uncontended(b *testing.B, workers int, prefix string, cycle Cycle) Cycles {
	b.ResetTimer()
	c := run(b, b.N, workers, prefix, cycle, false)
	b.StopTimer()
	return c
}

// UncontendedLossy is Uncontended for backends where a cycle may fail
// under load (a node timeout): failures are counted, the first few
// logged, and the worker goes on.
func UncontendedLossy(b *testing.B, workers int, prefix string, cycle Cycle) Cycles {
	b.ResetTimer()
	c := run(b, b.N, workers, prefix, cycle, true)
	b.StopTimer()
	return c
}

// Run spreads n cycles over workers goroutines, worker i on
// Name(prefix, i), without touching tb's timer. A failing cycle is
// reported with tb.Error and stops its worker.
func Run(tb testing.TB, n, workers int, prefix string, cycle Cycle) Cycles {
	return run(tb, n, workers, prefix, cycle, false)
}

// maxLogged is how many failures a lossy run logs.
const maxLogged = 3

func run(tb testing.TB, n, workers int, prefix string, cycle Cycle, lossy bool) Cycles {
	ctx := context.Background()
	var left, failed atomic.Int64
	left.Store(int64(n))
	lat := make([][]time.Duration, workers)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range workers {
		name := Name(prefix, i)
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				t0 := time.Now()
				if err := cycle(ctx, name); err != nil {
					if !lossy {
						tb.Error(err)
						return
					}
					if failed.Add(1) <= maxLogged {
						tb.Log(err)
					}
					continue
				}
				lat[i] = append(lat[i], time.Since(t0))
			}
		})
	}
	wg.Wait()
	return Cycles{N: n, Failed: int(failed.Load()), Elapsed: time.Since(start), Latencies: slices.Concat(lat...)}
}

// Rate is the successful cycles per second.
func (c Cycles) Rate() float64 { return float64(c.N-c.Failed) / c.Elapsed.Seconds() }

// ReportRate reports Rate as the metric unit (ops/s, cycles/s).
func (c Cycles) ReportRate(b *testing.B, unit string) { b.ReportMetric(c.Rate(), unit) }

// ReportFailures reports the share of cycles that failed, as failed/op.
func (c Cycles) ReportFailures(b *testing.B) {
	b.ReportMetric(float64(c.Failed)/float64(c.N), "failed/op")
}

// ReportLatencies reports the p50 and p99 of one cycle, as cycle-p50-ms
// and cycle-p99-ms.
func (c Cycles) ReportLatencies(b *testing.B) {
	b.ReportMetric(ms(pct(c.Latencies, 50)), "cycle-p50-ms")
	b.ReportMetric(ms(pct(c.Latencies, 99)), "cycle-p99-ms")
}
