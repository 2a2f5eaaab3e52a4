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
	// N is how many cycles were due (a count budget) or started (a timed
	// one); Failed how many returned an error.
	N, Failed int
	// Elapsed is the run's wall time.
	Elapsed time.Duration
	// Latencies holds the duration of every successful cycle.
	Latencies []time.Duration
	// Err is the first failure, if any.
	Err error
}

// OnError decides what a worker does after a failed operation: go on
// (true) or stop (false). It is called concurrently, and never for the
// cancellation that ends a timed run.
type OnError func(err error) (goOn bool)

// Stop is the OnError that stops the failing worker.
func Stop(error) bool { return false }

// GoOn is the OnError that counts the failure and goes on.
func GoOn(error) bool { return true }

// RunCycles spreads budget's cycles over workers goroutines, worker i on
// Name(prefix, i), and measures each. Cycles run under ctx (not under a
// timed budget's deadline, so that none is cut off half-way); ctx done
// stops the run early.
func RunCycles(ctx context.Context, budget Budget, workers int, prefix string, cycle Cycle, onErr OnError) Cycles {
	m, cancel := budget.start(ctx, 0)
	defer cancel()
	var failed, started atomic.Int64
	var first error
	var firstOnce sync.Once
	lat := make([][]time.Duration, workers)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range workers {
		name := Name(prefix, i)
		wg.Go(func() {
			for m.next() {
				started.Add(1)
				t0 := time.Now()
				if err := cycle(ctx, name); err != nil {
					failed.Add(1)
					firstOnce.Do(func() { first = err })
					if !onErr(err) {
						return
					}
					continue
				}
				lat[i] = append(lat[i], time.Since(t0))
			}
		})
	}
	wg.Wait()
	c := Cycles{N: budget.count, Failed: int(failed.Load()), Elapsed: time.Since(start), Latencies: slices.Concat(lat...), Err: first}
	if budget.Timed() {
		c.N = int(started.Load())
	}
	return c
}

// Uncontended resets b's timer and spreads b.N cycles over workers
// goroutines, worker i on Name(prefix, i). A failing cycle is reported
// with b.Error and stops its worker.
func Uncontended(b *testing.B, workers int, prefix string, cycle Cycle) Cycles {
	b.ResetTimer()
	c := RunCycles(context.Background(), Count(b.N), workers, prefix, cycle, failTB(b))
	b.StopTimer()
	return c
}

// UncontendedLossy is Uncontended for backends where a cycle may fail
// under load (a node timeout): failures are counted, the first few
// logged, and the worker goes on.
func UncontendedLossy(b *testing.B, workers int, prefix string, cycle Cycle) Cycles {
	b.ResetTimer()
	c := RunCycles(context.Background(), Count(b.N), workers, prefix, cycle, logTB(b))
	b.StopTimer()
	return c
}

// Run spreads n cycles over workers goroutines, worker i on
// Name(prefix, i), without touching tb's timer. A failing cycle is
// reported with tb.Error and stops its worker.
func Run(tb testing.TB, n, workers int, prefix string, cycle Cycle) Cycles {
	return RunCycles(context.Background(), Count(n), workers, prefix, cycle, failTB(tb))
}

// failTB reports every failure with tb.Error and stops the worker.
func failTB(tb testing.TB) OnError {
	return func(err error) bool {
		tb.Error(err)
		return false
	}
}

// maxLogged is how many failures a lossy run logs.
const maxLogged = 3

// logTB logs the first maxLogged failures with tb.Log and goes on.
func logTB(tb testing.TB) OnError {
	var n atomic.Int64
	return func(err error) bool {
		if n.Add(1) <= maxLogged {
			tb.Log(err)
		}
		return true
	}
}

// Rate is the successful cycles per second.
func (c Cycles) Rate() float64 {
	if c.Elapsed <= 0 {
		return 0
	}
	return float64(c.N-c.Failed) / c.Elapsed.Seconds()
}

// Merge is c and o as one run: counts and wall times add up, latencies
// join. It combines the alternating rounds of a comparison.
func (c Cycles) Merge(o Cycles) Cycles {
	return Cycles{
		N: c.N + o.N, Failed: c.Failed + o.Failed, Elapsed: c.Elapsed + o.Elapsed,
		Latencies: slices.Concat(c.Latencies, o.Latencies), Err: cmpErr(c.Err, o.Err),
	}
}

// cmpErr is the first non-nil of a and b.
func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// ReportRate reports Rate as the metric unit (ops/s, cycles/s).
func (c Cycles) ReportRate(b *testing.B, unit string) { b.ReportMetric(c.Rate(), unit) }

// ReportFailures reports the share of cycles that failed, as failed/op.
func (c Cycles) ReportFailures(b *testing.B) {
	if c.N > 0 {
		b.ReportMetric(float64(c.Failed)/float64(c.N), "failed/op")
	}
}

// ReportLatencies reports the p50 and p99 of one cycle, as cycle-p50-ms
// and cycle-p99-ms.
func (c Cycles) ReportLatencies(b *testing.B) {
	b.ReportMetric(ms(Percentile(c.Latencies, 50)), "cycle-p50-ms")
	b.ReportMetric(ms(Percentile(c.Latencies, 99)), "cycle-p99-ms")
}
