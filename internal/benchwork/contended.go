package benchwork

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Pause is how long a worker waits after each release before it tries
// again, so that the lock passes to another worker.
const Pause = time.Millisecond

// Contention is the outcome of a contended run.
type Contention struct {
	// N is how many critical sections were due.
	N int
	// Elapsed is the run's wall time.
	Elapsed time.Duration
	// Handoffs holds the gaps from a release to the next grant.
	Handoffs []time.Duration
	// Waits holds the time of every acquire, from its start to its grant.
	Waits []time.Duration
	// Counts holds each worker's critical sections.
	Counts []int

	mu       sync.Mutex
	released time.Time // when the last holder released; zero after a grant
}

// Contended resets b's timer and runs b.N critical sections over workers
// goroutines that all take one lock through lock, each pausing Pause
// after its release. A failing acquire or release is reported with
// b.Error and stops its worker.
func Contended(b *testing.B, workers int, lock Lock) *Contention {
	c := &Contention{N: b.N, Counts: make([]int, workers)}
	var left atomic.Int64
	left.Store(int64(b.N))
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for i := range workers {
		wg.Go(func() { c.Counts[i] = c.work(b, i, lock, &left) })
	}
	wg.Wait()
	c.Elapsed = time.Since(start)
	b.StopTimer()
	return c
}

// work is one worker's loop; it returns the worker's critical sections.
func (c *Contention) work(b *testing.B, worker int, lock Lock, left *atomic.Int64) int {
	ctx := context.Background()
	n := 0
	for left.Add(-1) >= 0 {
		t0 := time.Now()
		release, err := lock(ctx, worker)
		if err != nil {
			b.Error(err)
			return n
		}
		c.granted(time.Since(t0))
		n++
		c.releasing()
		if err := release(ctx); err != nil {
			b.Error(err)
			return n
		}
		time.Sleep(Pause)
	}
	return n
}

// granted records a grant after a wait, and the handoff that led to it.
func (c *Contention) granted(wait time.Duration) {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.Waits = append(c.Waits, wait)
	if !c.released.IsZero() {
		c.Handoffs = append(c.Handoffs, now.Sub(c.released))
		c.released = time.Time{}
	}
}

// releasing records that the holder is about to release.
func (c *Contention) releasing() {
	c.mu.Lock()
	c.released = time.Now()
	c.mu.Unlock()
}

// Report reports every metric of the run (see ReportRate, ReportHandoffs,
// ReportWaits and ReportFairness) and zeroes ns/op, which means nothing
// here.
func (c *Contention) Report(b *testing.B) {
	c.ReportRate(b)
	c.ReportHandoffs(b)
	c.ReportWaits(b)
	c.ReportFairness(b)
	b.ReportMetric(0, "ns/op")
}

// ReportRate reports critical sections per second, as cs/s.
func (c *Contention) ReportRate(b *testing.B) {
	b.ReportMetric(float64(c.N)/c.Elapsed.Seconds(), "cs/s")
}

// ReportHandoffs reports the p50 and p99 handoff, as handoff-p50-ms and
// handoff-p99-ms.
func (c *Contention) ReportHandoffs(b *testing.B) {
	b.ReportMetric(ms(pct(c.Handoffs, 50)), "handoff-p50-ms")
	b.ReportMetric(ms(pct(c.Handoffs, 99)), "handoff-p99-ms")
}

// ReportWaits reports the p50 and p99 wait per acquire, as wait-p50-ms
// and wait-p99-ms.
func (c *Contention) ReportWaits(b *testing.B) {
	b.ReportMetric(ms(pct(c.Waits, 50)), "wait-p50-ms")
	b.ReportMetric(ms(pct(c.Waits, 99)), "wait-p99-ms")
}

// ReportFairness reports the fewest critical sections of a worker over
// the most, as fair-min/max (nothing when no worker got the lock).
func (c *Contention) ReportFairness(b *testing.B) {
	lo, hi := slices.Min(c.Counts), slices.Max(c.Counts)
	if hi > 0 {
		b.ReportMetric(float64(lo)/float64(hi), "fair-min/max")
	}
}
