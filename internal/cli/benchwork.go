package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlockdev/dlock"
)

// benchResult is one workload's measurements; `bench --json` prints one
// per line.
type benchResult struct {
	Workload     string  `json:"workload"`
	Goroutines   int     `json:"goroutines"`
	Contended    bool    `json:"contended"`
	Ops          int64   `json:"ops"`
	Seconds      float64 `json:"seconds"`
	OpsPerSec    float64 `json:"ops_per_sec"`
	LatencyP50Ms float64 `json:"latency_p50_ms"`
	LatencyP99Ms float64 `json:"latency_p99_ms"`
	HandoffP50Ms float64 `json:"handoff_p50_ms,omitempty"`
	HandoffP99Ms float64 `json:"handoff_p99_ms,omitempty"`
	Errors       int64   `json:"errors"`
	Violations   int64   `json:"violations"`
}

// benchWorkload is one of the workloads of `dlock bench`.
type benchWorkload struct {
	goroutines int
	contended  bool
}

var benchWorkloads = []benchWorkload{{1, false}, {16, false}, {64, false}, {16, true}}

// benchHold is how long a contended holder keeps the lock.
const benchHold = time.Millisecond

// benchState is shared by a workload's goroutines.
type benchState struct {
	ops, errs, violations atomic.Int64
	holders               atomic.Int32 // contended: current holders, must be 0 or 1
	lastRelease           atomic.Int64 // contended: unix nanos of the last release

	mu        sync.Mutex
	latencies []time.Duration
	handoffs  []time.Duration
}

func (s *benchState) merge(lat, hand []time.Duration) {
	s.mu.Lock()
	s.latencies = append(s.latencies, lat...)
	s.handoffs = append(s.handoffs, hand...)
	s.mu.Unlock()
}

func (w benchWorkload) name() string {
	if w.contended {
		return fmt.Sprintf("contended-%d", w.goroutines)
	}
	return fmt.Sprintf("uncontended-%d", w.goroutines)
}

// run opens the lockers (one shared for uncontended workloads, one per
// goroutine for the contended one) and runs the workload for opts.Duration.
func (w benchWorkload) run(ctx context.Context, opts *benchOptions) (benchResult, error) {
	lockers, err := w.open(ctx, opts)
	if err != nil {
		return benchResult{}, err
	}
	defer func() {
		for _, l := range lockers {
			l.Close()
		}
	}()
	prefix := "dlock-bench/" + randomHex(4) + "/"
	st := &benchState{}
	wctx, cancel := context.WithTimeout(ctx, opts.Duration)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for g := range w.goroutines {
		l := lockers[g%len(lockers)]
		wg.Go(func() {
			if w.contended {
				benchContended(wctx, l, prefix+"shared", st)
			} else {
				benchUncontended(wctx, l, fmt.Sprintf("%su%d", prefix, g), st)
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return benchResult{}, fmt.Errorf("bench interrupted: %w", err)
	}
	return w.result(st, time.Since(start)), nil
}

func (w benchWorkload) open(ctx context.Context, opts *benchOptions) ([]*dlock.Locker, error) {
	n := 1
	if w.contended {
		n = w.goroutines
	}
	var ls []*dlock.Locker
	for range n {
		l, err := openLocker(ctx, opts.URL, dlock.WithTTL(opts.TTL))
		if err != nil {
			for _, o := range ls {
				o.Close()
			}
			return nil, err
		}
		ls = append(ls, l)
	}
	return ls, nil
}

func benchUncontended(ctx context.Context, l *dlock.Locker, name string, st *benchState) {
	var lat []time.Duration
	defer func() { st.merge(lat, nil) }()
	for ctx.Err() == nil {
		t0 := time.Now()
		lease, err := l.TryAcquire(ctx, name)
		if err != nil {
			if ctx.Err() == nil {
				st.errs.Add(1)
			}
			continue
		}
		lat = append(lat, time.Since(t0))
		if err := lease.Release(context.Background()); err != nil {
			st.errs.Add(1)
			continue
		}
		st.ops.Add(1)
	}
}

func benchContended(ctx context.Context, l *dlock.Locker, name string, st *benchState) {
	var lat, hand []time.Duration
	defer func() { st.merge(lat, hand) }()
	for ctx.Err() == nil {
		t0 := time.Now()
		lease, err := l.Acquire(ctx, name, dlock.WithWait(dlock.Forever))
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded) {
				st.errs.Add(1)
			}
			continue
		}
		got := time.Now()
		lat = append(lat, got.Sub(t0))
		if prev := st.lastRelease.Load(); prev != 0 {
			hand = append(hand, got.Sub(time.Unix(0, prev)))
		}
		if st.holders.Add(1) != 1 {
			st.violations.Add(1)
		}
		time.Sleep(benchHold)
		st.holders.Add(-1)
		st.lastRelease.Store(time.Now().UnixNano())
		if err := lease.Release(context.Background()); err != nil {
			st.errs.Add(1)
			continue
		}
		st.ops.Add(1)
	}
}

func (w benchWorkload) result(st *benchState, elapsed time.Duration) benchResult {
	r := benchResult{
		Workload: w.name(), Goroutines: w.goroutines, Contended: w.contended,
		Ops: st.ops.Load(), Seconds: elapsed.Seconds(),
		Errors: st.errs.Load(), Violations: st.violations.Load(),
	}
	r.OpsPerSec = float64(r.Ops) / r.Seconds
	r.LatencyP50Ms, r.LatencyP99Ms = percentileMs(st.latencies, 50), percentileMs(st.latencies, 99)
	if w.contended {
		r.HandoffP50Ms, r.HandoffP99Ms = percentileMs(st.handoffs, 50), percentileMs(st.handoffs, 99)
	}
	return r
}

// percentileMs is the p-th percentile of ds in milliseconds (0 if empty).
func percentileMs(ds []time.Duration, p int) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := min(len(s)*p/100, len(s)-1)
	return float64(s[i]) / float64(time.Millisecond)
}

func writeJSONLine(w io.Writer, v any) error { return json.NewEncoder(w).Encode(v) }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
