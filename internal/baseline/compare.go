package baseline

import (
	"context"
	"fmt"
	"time"

	"github.com/dlockdev/dlock/internal/benchwork"
)

// Workload is one row of a comparison.
type Workload struct {
	Name       string
	Goroutines int
	Contended  bool
}

// Workloads are the rows of `dlock bench` and of the table:
// TryAcquire+Release on distinct names from 1, 16 and 64 goroutines, and
// 16 waiters on one name.
var Workloads = []Workload{
	{"uncontended-1", 1, false},
	{"uncontended-16", 16, false},
	{"uncontended-64", 64, false},
	{"contended-16", 16, true},
}

// Measure is one side's figures for one workload.
type Measure struct {
	// Ops is the cycles (uncontended) or critical sections (contended)
	// completed; Errors the failures; Seconds the wall time measured.
	Ops     int     `json:"ops"`
	Errors  int     `json:"errors"`
	Seconds float64 `json:"seconds"`
	// PerSec is Ops per second.
	PerSec float64 `json:"per_sec"`
	// P50Ms and P99Ms are the cycle latency (uncontended) or the acquire
	// wait (contended).
	P50Ms float64 `json:"p50_ms"`
	P99Ms float64 `json:"p99_ms"`
	// Contended only: release-to-next-grant times, min/max share of the
	// critical sections per worker, and grants made while another worker
	// held the lock (must be 0).
	HandoffP50Ms float64 `json:"handoff_p50_ms,omitempty"`
	HandoffP99Ms float64 `json:"handoff_p99_ms,omitempty"`
	Fairness     float64 `json:"fairness,omitempty"`
	Violations   int     `json:"violations"`
	// RoundTrips is the client round trips per op, counted; nil when the
	// backend is embedded.
	RoundTrips *float64 `json:"round_trips_per_op"`
	// ServerUsec is the server's time per op (see Comparison.ServerTime);
	// nil when the backend does not expose it.
	ServerUsec *float64 `json:"server_usec_per_op"`
	// ClientUsec is this process's CPU time per op (user + system, the
	// harness's own share included, alike for both sides); nil where the
	// platform does not say.
	ClientUsec *float64 `json:"client_usec_per_op"`
	// FirstError is the first failure's message, if any.
	FirstError string `json:"first_error,omitempty"`
}

// Comparison is dlock against the baseline on one workload.
type Comparison struct {
	Backend    string `json:"backend"`
	Workload   string `json:"workload"`
	Goroutines int    `json:"goroutines"`
	Contended  bool   `json:"contended"`
	// BaselineImpl says what the baseline does; ServerTime what
	// ServerUsec measures.
	BaselineImpl string  `json:"baseline_impl"`
	ServerTime   string  `json:"server_time,omitempty"`
	Dlock        Measure `json:"dlock"`
	Baseline     Measure `json:"baseline"`
	// Ratio is dlock's rate over the baseline's.
	Ratio float64 `json:"ratio"`
	// Contended only, where the target measures one (Target.Write): the
	// p50 of the backend's own write, sampled between the rounds of this
	// run, and what that write is.
	WriteP50Ms float64 `json:"write_p50_ms,omitempty"`
	Write      string  `json:"write,omitempty"`
}

// Config tunes Compare.
type Config struct {
	// Duration is each side's measured time per workload, split into
	// Rounds slices (default 4) run in alternation (dlock, baseline,
	// baseline, dlock, ...) so that drifting load on the machine hits
	// both alike.
	Duration time.Duration
	Rounds   int
	// Workloads to run (default Workloads).
	Workloads []Workload
	// Prefix starts every lock name of the run.
	Prefix string
}

// Compare measures both sides of t on every workload.
func Compare(ctx context.Context, t *Target, cfg Config, each func(Comparison)) ([]Comparison, error) {
	if cfg.Rounds < 1 {
		cfg.Rounds = 4
	}
	if cfg.Workloads == nil {
		cfg.Workloads = Workloads
	}
	var out []Comparison
	for _, w := range cfg.Workloads {
		c, err := t.compare(ctx, w, cfg)
		if err != nil {
			return out, err
		}
		if each != nil {
			each(c)
		}
		out = append(out, c)
	}
	return out, nil
}

// tally accumulates one side's rounds.
type tally struct {
	cycles     benchwork.Cycles
	contention *benchwork.Contention
	rt, server int64 // round trips; server time in ns
	serverOK   bool
	client     time.Duration // this process's CPU
	clientOK   bool
}

func (t *Target) compare(ctx context.Context, w Workload, cfg Config) (Comparison, error) {
	sides := [2]*Side{&t.Dlock, &t.Base}
	var tallies [2]tally
	for i := range tallies {
		tallies[i].serverOK = t.ServerTime != nil
		_, tallies[i].clientOK = benchwork.ProcessCPU()
		if !w.Contended {
			// Warm every pooled connection (prepared statements, scripts)
			// before anything is counted.
			benchwork.RunCycles(ctx, benchwork.Count(4*w.Goroutines), w.Goroutines,
				fmt.Sprintf("%swarm/%s/%d/", cfg.Prefix, w.Name, i), sides[i].Cycle, benchwork.GoOn)
		}
	}
	var locks [2]benchwork.Lock
	if w.Contended {
		for i, s := range sides {
			lock, teardown, err := setUpContenders(ctx, s, w, fmt.Sprintf("%s%s/%d/lock", cfg.Prefix, w.Name, i))
			if err != nil {
				return Comparison{}, err
			}
			defer teardown()
			locks[i] = lock
		}
	}
	slice := cfg.Duration / time.Duration(cfg.Rounds)
	var writes []time.Duration
	for r := range cfg.Rounds {
		if w.Contended && t.Write != nil {
			ws, err := t.sampleWrites(ctx, writeSamples)
			if err != nil {
				return Comparison{}, fmt.Errorf("%s: %s: %w", w.Name, t.WriteKind, err)
			}
			writes = append(writes, ws...)
		}
		for k := range 2 {
			i := (r + k) % 2 // dlock, base; base, dlock; ...
			name := fmt.Sprintf("%s%s/%d/r%d/", cfg.Prefix, w.Name, i, r)
			if err := t.round(ctx, w, sides[i], &tallies[i], slice, name, locks[i]); err != nil {
				return Comparison{}, err
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return Comparison{}, fmt.Errorf("bench interrupted: %w", err)
	}
	c := Comparison{Backend: t.Backend, Workload: w.Name, Goroutines: w.Goroutines, Contended: w.Contended,
		BaselineImpl: t.Baseline, ServerTime: t.ServerTimeKind,
		Dlock: tallies[0].measure(sides[0]), Baseline: tallies[1].measure(sides[1])}
	if w.Contended {
		c.BaselineImpl = t.BaselineContended
	}
	if len(writes) > 0 {
		c.WriteP50Ms, c.Write = ms(benchwork.Percentile(writes, 50)), t.WriteKind
	}
	if c.Baseline.PerSec > 0 {
		c.Ratio = c.Dlock.PerSec / c.Baseline.PerSec
	}
	return c, nil
}

// setUpContenders sets up one side's contenders for a contended
// workload, once for all its rounds, and has each take and release the
// lock once before anything is counted: a contender's connections,
// sessions and subscriptions are then up, as in the long-running
// processes the workload stands for, and none of them is set up again in
// every round.
func setUpContenders(ctx context.Context, s *Side, w Workload, name string) (benchwork.Lock, func(), error) {
	lock, teardown, err := s.Contend(ctx, w.Goroutines, name)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: set up %d contenders: %w", w.Name, w.Goroutines, err)
	}
	for worker := range w.Goroutines {
		release, err := lock(ctx, worker)
		if err == nil {
			err = release(ctx)
		}
		if err != nil {
			teardown()
			return nil, nil, fmt.Errorf("%s: warm contender %d: %w", w.Name, worker, err)
		}
	}
	return lock, teardown, nil
}

// round runs one side for d and adds it to tl; lock is the side's
// contenders in a contended workload.
func (t *Target) round(ctx context.Context, w Workload, s *Side, tl *tally, d time.Duration, name string, lock benchwork.Lock) error {
	run := func() {
		tl.cycles = tl.cycles.Merge(benchwork.RunCycles(ctx, benchwork.For(d), w.Goroutines, name, s.Cycle, benchwork.GoOn))
	}
	if w.Contended {
		run = func() {
			c := benchwork.RunContended(ctx, benchwork.For(d), benchwork.Contend{Workers: w.Goroutines, OnError: benchwork.GoOn}, lock)
			if tl.contention == nil {
				tl.contention = c
			} else {
				tl.contention = tl.contention.Merge(c)
			}
		}
	}
	rt0, srv0 := t.probe(ctx, s, tl)
	cpu0, _ := benchwork.ProcessCPU()
	run()
	cpu1, _ := benchwork.ProcessCPU()
	rt1, srv1 := t.probe(ctx, s, tl)
	tl.rt += rt1 - rt0
	tl.server += int64(srv1 - srv0)
	tl.client += cpu1 - cpu0
	return nil
}

// probe reads the side's round-trip count and the server's time; a
// failed server read turns server time off for this tally.
func (t *Target) probe(ctx context.Context, s *Side, tl *tally) (int64, time.Duration) {
	var rt int64
	if s.RoundTrips != nil {
		rt = s.RoundTrips.Load()
	}
	if !tl.serverOK {
		return rt, 0
	}
	d, err := t.ServerTime(ctx)
	if err != nil {
		tl.serverOK = false
	}
	return rt, d
}

// measure turns a side's tally into its figures.
func (tl *tally) measure(s *Side) Measure {
	var m Measure
	if c := tl.contention; c != nil {
		m = Measure{Ops: len(c.Waits), Errors: c.Failed, Seconds: c.Elapsed.Seconds(), PerSec: c.Rate(),
			P50Ms: ms(benchwork.Percentile(c.Waits, 50)), P99Ms: ms(benchwork.Percentile(c.Waits, 99)),
			HandoffP50Ms: ms(benchwork.Percentile(c.Handoffs, 50)), HandoffP99Ms: ms(benchwork.Percentile(c.Handoffs, 99)),
			Fairness: c.Fairness(), Violations: c.Violations}
		if c.Err != nil {
			m.FirstError = c.Err.Error()
		}
	} else {
		c := tl.cycles
		m = Measure{Ops: len(c.Latencies), Errors: c.Failed, Seconds: c.Elapsed.Seconds(), PerSec: c.Rate(),
			P50Ms: ms(benchwork.Percentile(c.Latencies, 50)), P99Ms: ms(benchwork.Percentile(c.Latencies, 99))}
		if c.Err != nil {
			m.FirstError = c.Err.Error()
		}
	}
	if m.Ops == 0 {
		return m
	}
	if s.RoundTrips != nil {
		v := float64(tl.rt) / float64(m.Ops)
		m.RoundTrips = &v
	}
	if tl.serverOK {
		v := float64(tl.server) / float64(time.Microsecond) / float64(m.Ops)
		m.ServerUsec = &v
	}
	if tl.clientOK {
		v := float64(tl.client) / float64(time.Microsecond) / float64(m.Ops)
		m.ClientUsec = &v
	}
	return m
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// writeSamples is how many writes sampleWrites times before each round
// of a contended workload.
const writeSamples = 25

// sampleWrites times n of the backend's own writes (Target.Write), one
// after another.
func (t *Target) sampleWrites(ctx context.Context, n int) ([]time.Duration, error) {
	out := make([]time.Duration, 0, n)
	for range n {
		start := time.Now()
		if err := t.Write(ctx); err != nil {
			return nil, err
		}
		out = append(out, time.Since(start))
	}
	return out, nil
}
