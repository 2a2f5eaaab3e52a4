package mysqllock_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/internal/benchwork"
	"github.com/dlockdev/dlock/mysqllock"
)

// handoffRounds is the fewest hand-offs one run measures, whatever b.N.
const handoffRounds = 100

// BenchmarkHandoff measures the time from a holder's release to another
// waiter's grant, in both modes: "waiting" is one waiter that has waited
// 20 ms when the lock is released, round after round; "contended" is 16
// workers (each its own Locker on one pool) that take the lock again 1 ms
// after each release. Run with -benchtime=1x: every run measures
// handoffRounds grants at least.
func BenchmarkHandoff(b *testing.B) {
	d := newDB(b)
	for _, mode := range []mysqllock.Mode{mysqllock.Lease, mysqllock.GetLock} {
		cfg := mysqllock.Config{Mode: mode}
		b.Run(string(mode)+"/waiting", func(b *testing.B) {
			reportHandoffs(b, waitingHandoffs(b, d, cfg))
		})
		b.Run(string(mode)+"/contended=16", func(b *testing.B) {
			reportHandoffs(b, contendedHandoffs(b, d, cfg, 16))
		})
	}
}

// waitingHandoffs makes max(b.N, handoffRounds) rounds: a holder takes
// the lock, a waiter on another Locker starts waiting, and 20 ms later the
// holder releases.
func waitingHandoffs(b *testing.B, d *db, cfg mysqllock.Config) *handoffRun {
	name := fmt.Sprintf("bench/waiting/%d", time.Now().UnixNano())
	holder, waiter := d.locker(b, cfg), d.locker(b, cfg)
	r := &handoffRun{last: -1, counts: make([]int, 2)}
	ctx := ctx(b)
	opts := []dlock.Option{dlock.WithTTL(5 * time.Second), dlock.WithWait(time.Minute)}
	b.ResetTimer()
	for range max(b.N, handoffRounds) {
		held, err := holder.Acquire(ctx, name, opts...)
		if err != nil {
			b.Fatal(err)
		}
		r.granted(0)
		got := make(chan *dlock.Lease, 1)
		go func() {
			l, err := waiter.Acquire(ctx, name, opts...)
			if err != nil {
				b.Error(err)
			}
			r.granted(1)
			got <- l
		}()
		time.Sleep(20 * time.Millisecond)
		r.releasing(0)
		if err := held.Release(ctx); err != nil {
			b.Fatal(err)
		}
		l := <-got
		if l == nil {
			b.FailNow()
		}
		r.releasing(1)
		if err := l.Release(ctx); err != nil {
			b.Fatal(err)
		}
		r.idle()
	}
	b.StopTimer()
	return r
}

// handoffRun is one contended run: the gaps from a release to the grant
// of another worker, the grants a releaser took again before any waiter
// (barged), and each worker's grants.
type handoffRun struct {
	mu       sync.Mutex
	last     int // the worker that last released; -1 before
	released time.Time
	handoffs []time.Duration
	barged   int
	counts   []int
	grants   int
}

// contendedHandoffs runs max(b.N, handoffRounds) critical sections over
// workers Lockers that all take one name; each worker takes the lock
// again 1 ms after its release.
func contendedHandoffs(b *testing.B, d *db, cfg mysqllock.Config, workers int) *handoffRun {
	name := fmt.Sprintf("bench/handoff/%d", time.Now().UnixNano())
	r := &handoffRun{last: -1, counts: make([]int, workers)}
	rounds := max(b.N, handoffRounds)
	ctx := ctx(b)
	b.ResetTimer()
	var wg sync.WaitGroup
	for i := range workers {
		l := d.locker(b, cfg)
		wg.Go(func() {
			for r.more(rounds) {
				lease, err := l.Acquire(ctx, name, dlock.WithTTL(5*time.Second), dlock.WithWait(time.Minute))
				if err != nil {
					b.Error(err)
					return
				}
				r.granted(i)
				r.releasing(i)
				if err := lease.Release(ctx); err != nil {
					b.Error(err)
					return
				}
				time.Sleep(time.Millisecond)
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	return r
}

func (r *handoffRun) more(rounds int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.grants < rounds
}

func (r *handoffRun) granted(worker int) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.grants++
	r.counts[worker]++
	switch {
	case r.last < 0:
	case r.last == worker:
		r.barged++
	default:
		r.handoffs = append(r.handoffs, now.Sub(r.released))
	}
}

// idle forgets the last release: nobody waited for it.
func (r *handoffRun) idle() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.last = -1
}

func (r *handoffRun) releasing(worker int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.last, r.released = worker, time.Now()
}

// reportHandoffs reports the hand-offs to another worker (min, median,
// p90, p99 and max in milliseconds, and their count), the grants a
// releaser took again before any waiter, and fairness.
func reportHandoffs(b *testing.B, r *handoffRun) {
	h := r.handoffs
	if len(h) == 0 {
		b.Fatalf("no hand-off to another worker in %d grants", r.grants)
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(float64(len(h)), "handoffs")
	b.ReportMetric(float64(r.barged), "barged")
	b.ReportMetric(ms(slices.Min(h)), "min-ms")
	b.ReportMetric(ms(benchwork.Percentile(h, 50)), "p50-ms")
	b.ReportMetric(ms(benchwork.Percentile(h, 90)), "p90-ms")
	b.ReportMetric(ms(benchwork.Percentile(h, 99)), "p99-ms")
	b.ReportMetric(ms(slices.Max(h)), "max-ms")
	b.ReportMetric(benchwork.Fairness(r.counts), "fair-min/max")
	b.ReportMetric(0, "ns/op")
}
