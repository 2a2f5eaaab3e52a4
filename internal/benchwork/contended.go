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
	// N is how many critical sections were due (a count budget) or
	// granted (a timed one).
	N int
	// Elapsed is the run's wall time.
	Elapsed time.Duration
	// Handoffs holds the gaps from a release to the next grant.
	Handoffs []time.Duration
	// Waits holds the time of every acquire, from its start to its grant.
	Waits []time.Duration
	// Counts holds each worker's critical sections.
	Counts []int
	// Failed counts failed acquires and releases; Err is the first.
	Failed int
	Err    error
	// Violations counts grants made while another worker held the lock
	// (while Contend.Permits others held it, for a semaphore): a broken
	// mutual exclusion. It must be 0.
	Violations int
	// MaxHolders is the most workers seen holding the lock at once, from
	// each grant's return to its release call: a lower bound of the true
	// most, so any excess over the permits is real.
	MaxHolders int

	mu       sync.Mutex
	released time.Time // when the last holder released; zero after a grant
	holders  atomic.Int32
}

// Contend configures a contended run.
type Contend struct {
	// Workers is how many goroutines take the lock (worker 0..Workers-1).
	Workers int
	// Hold is how long a worker keeps the lock once granted (default 0:
	// it releases at once).
	Hold time.Duration
	// Critical, if set, runs in every critical section, after Hold and
	// before the release: the work done under the lock.
	Critical func(worker int)
	// OnError decides what a worker does after a failed acquire or
	// release (default Stop).
	OnError OnError
	// Permits is how many workers may hold the lock at once (default 1:
	// a mutex; more for a semaphore's permits).
	Permits int
	// Drain is how long, after a timed budget's end, the waits under way
	// then may still be granted (and counted) before they are canceled;
	// no wait starts after the end. 0 cancels them at the end. Canceling
	// waits costs some backends more than others (a raw blocking
	// pg_advisory_lock canceled by closing its connection leaves the
	// server's backend queued until it notices), so comparisons drain.
	Drain time.Duration
}

// RunContended runs budget's critical sections over cfg.Workers
// goroutines that all take one lock through lock, each holding it
// cfg.Hold and pausing Pause after its release. A timed budget cancels
// the waits still under way when it ends (cfg.Drain after it); their
// errors are not failures.
// Releases run without the budget's cancellation, so that a granted lock
// is always given back.
func RunContended(ctx context.Context, budget Budget, cfg Contend, lock Lock) *Contention {
	if cfg.OnError == nil {
		cfg.OnError = Stop
	}
	cfg.Permits = max(cfg.Permits, 1)
	c := &Contention{N: budget.count, Counts: make([]int, cfg.Workers)}
	m, cancel := budget.start(ctx, cfg.Drain)
	defer cancel()
	var wg sync.WaitGroup
	start := time.Now()
	for i := range cfg.Workers {
		wg.Go(func() { c.Counts[i] = c.work(m, i, cfg, lock) })
	}
	wg.Wait()
	c.Elapsed = time.Since(start)
	if budget.Timed() {
		c.N = len(c.Waits)
	}
	return c
}

// Contended resets b's timer and runs b.N critical sections over workers
// goroutines that all take one lock through lock, each pausing Pause
// after its release. A failing acquire or release is reported with
// b.Error and stops its worker.
func Contended(b *testing.B, workers int, lock Lock) *Contention {
	b.ResetTimer()
	c := RunContended(context.Background(), Count(b.N), Contend{Workers: workers, OnError: failTB(b)}, lock)
	b.StopTimer()
	return c
}

// work is one worker's loop; it returns the worker's critical sections.
func (c *Contention) work(m *meter, worker int, cfg Contend, lock Lock) int {
	onErr := cfg.OnError
	n := 0
	for m.next() {
		t0 := time.Now()
		release, err := lock(m.ctx, worker)
		if err != nil {
			if m.over() || c.failed(err, onErr) {
				continue
			}
			return n
		}
		c.granted(time.Since(t0), cfg.Permits)
		n++
		if cfg.Hold > 0 {
			time.Sleep(cfg.Hold)
		}
		if cfg.Critical != nil {
			cfg.Critical(worker)
		}
		c.releasing()
		if err := release(context.WithoutCancel(m.ctx)); err != nil && !c.failed(err, onErr) {
			return n
		}
		time.Sleep(Pause)
	}
	return n
}

// failed records a failure and reports whether the worker goes on.
func (c *Contention) failed(err error, onErr OnError) bool {
	c.mu.Lock()
	c.Failed++
	c.Err = cmpErr(c.Err, err)
	c.mu.Unlock()
	return onErr(err)
}

// granted records a grant after a wait, and the handoff that led to it.
func (c *Contention) granted(wait time.Duration, permits int) {
	now := time.Now()
	holders := int(c.holders.Add(1))
	c.mu.Lock()
	defer c.mu.Unlock()
	if holders > permits {
		c.Violations++
	}
	c.MaxHolders = max(c.MaxHolders, holders)
	c.Waits = append(c.Waits, wait)
	if !c.released.IsZero() {
		c.Handoffs = append(c.Handoffs, now.Sub(c.released))
		c.released = time.Time{}
	}
}

// releasing records that the holder is about to release.
func (c *Contention) releasing() {
	c.holders.Add(-1)
	c.mu.Lock()
	c.released = time.Now()
	c.mu.Unlock()
}

// Rate is the critical sections granted per second.
func (c *Contention) Rate() float64 {
	if c.Elapsed <= 0 {
		return 0
	}
	return float64(len(c.Waits)) / c.Elapsed.Seconds()
}

// Fairness is the fewest critical sections of a worker over the most
// (0 when no worker got the lock).
func (c *Contention) Fairness() float64 { return Fairness(c.Counts) }

// Merge is c and o as one run: counts, failures and wall times add up,
// timings join, and worker i's critical sections are summed.
func (c *Contention) Merge(o *Contention) *Contention {
	counts := slices.Clone(c.Counts)
	for i, n := range o.Counts {
		if i < len(counts) {
			counts[i] += n
		} else {
			counts = append(counts, n)
		}
	}
	return &Contention{
		N: c.N + o.N, Elapsed: c.Elapsed + o.Elapsed,
		Handoffs: slices.Concat(c.Handoffs, o.Handoffs), Waits: slices.Concat(c.Waits, o.Waits),
		Counts: counts, Failed: c.Failed + o.Failed, Err: cmpErr(c.Err, o.Err),
		Violations: c.Violations + o.Violations, MaxHolders: max(c.MaxHolders, o.MaxHolders),
	}
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
	b.ReportMetric(ms(Percentile(c.Handoffs, 50)), "handoff-p50-ms")
	b.ReportMetric(ms(Percentile(c.Handoffs, 99)), "handoff-p99-ms")
}

// ReportWaits reports the p50 and p99 wait per acquire, as wait-p50-ms
// and wait-p99-ms.
func (c *Contention) ReportWaits(b *testing.B) {
	b.ReportMetric(ms(Percentile(c.Waits, 50)), "wait-p50-ms")
	b.ReportMetric(ms(Percentile(c.Waits, 99)), "wait-p99-ms")
}

// ReportFairness reports the fewest critical sections of a worker over
// the most, as fair-min/max (nothing when no worker got the lock).
func (c *Contention) ReportFairness(b *testing.B) {
	if slices.Max(c.Counts) > 0 {
		b.ReportMetric(c.Fairness(), "fair-min/max")
	}
}
