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

// Workloads are the rows of `dlock bench` and of docs/benchmarks.md:
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
	// BaselineImpl says what the baseline does (contended: its best way
	// of waiting); ServerTime what ServerUsec measures.
	BaselineImpl string  `json:"baseline_impl"`
	ServerTime   string  `json:"server_time,omitempty"`
	Dlock        Measure `json:"dlock"`
	// Baseline is the baseline's figures: contended, those of its best
	// way of waiting (Candidates).
	Baseline Measure `json:"baseline"`
	// Ratio is dlock's rate over the baseline's.
	Ratio float64 `json:"ratio"`
	// Candidates, contended only, are every way the baseline waited, in
	// the order measured; Baseline is the best of those not Extra.
	Candidates []Candidate `json:"candidates,omitempty"`
	// DlockAlso, contended only, are dlock's other ways of contending,
	// measured for reference (SharedLocker); Dlock is its first way's.
	DlockAlso []Candidate `json:"dlock_also,omitempty"`
	// Contended only, where the target measures one (Target.Write): the
	// p50 of the backend's own write, sampled between the rounds of this
	// run, and what that write is.
	WriteP50Ms float64 `json:"write_p50_ms,omitempty"`
	Write      string  `json:"write,omitempty"`
}

// Candidate is one way the baseline waited in a contended workload.
type Candidate struct {
	Name string `json:"name"`
	// Extra marks a way measured for reference only (Contender.Extra).
	Extra bool `json:"extra,omitempty"`
	// Best marks the candidate the comparison's Ratio is against.
	Best    bool    `json:"best,omitempty"`
	Measure Measure `json:"measure"`
}

// Config tunes Compare.
type Config struct {
	// Duration is each side's measured time per workload (each of the
	// baseline's ways of waiting, contended), split into Rounds slices
	// (default 4) run in alternation (dlock, baseline, baseline, dlock,
	// ...) so that drifting load on the machine hits both alike.
	Duration time.Duration
	// Ops, when positive, replaces Duration by a count: each side runs
	// Ops operations per workload (at least one a round), whatever the
	// machine's speed, and no wait is cut short. Tests use it.
	Ops    int
	Rounds int
	// Workloads to run (default Workloads).
	Workloads []Workload
	// Prefix starts every lock name of the run.
	Prefix string
}

// drain is how long the waits under way when a timed contended slice
// ends may still be granted: canceling them would charge a side for how
// its backend cleans a canceled wait up (see benchwork.Contend.Drain).
const drain = 30 * time.Second

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

// budget is one round's budget of one side.
func (cfg Config) budget() benchwork.Budget {
	if cfg.Ops > 0 {
		return benchwork.Count(max(1, (cfg.Ops+cfg.Rounds-1)/cfg.Rounds))
	}
	return benchwork.For(cfg.Duration / time.Duration(cfg.Rounds))
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

// entrant is one measured way of taking the lock in a workload: an
// uncontended side, or one contender of a side.
type entrant struct {
	side *Side
	name string
	// extra: a baseline contender for reference only.
	extra bool
	// contended only: the way of waiting, set up anew for each round
	// (SetUpContenders) on the lock named lockName.
	contender *Contender
	lockName  string
	tally     tally
}

func (t *Target) compare(ctx context.Context, w Workload, cfg Config) (Comparison, error) {
	es := t.entrants(ctx, w, cfg)
	var writes []time.Duration
	for r := range cfg.Rounds {
		if w.Contended && t.Write != nil {
			ws, err := t.sampleWrites(ctx, writeSamples)
			if err != nil {
				return Comparison{}, fmt.Errorf("%s: %s: %w", w.Name, t.WriteKind, err)
			}
			writes = append(writes, ws...)
		}
		for k := range es {
			i := (r + k) % len(es) // dlock, base; base, dlock; ... for two
			name := fmt.Sprintf("%s%s/%d/r%d/", cfg.Prefix, w.Name, i, r)
			if err := t.round(ctx, w, es[i], cfg.budget(), name); err != nil {
				return Comparison{}, err
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return Comparison{}, fmt.Errorf("bench interrupted: %w", err)
	}
	c := Comparison{Backend: t.Backend, Workload: w.Name, Goroutines: w.Goroutines, Contended: w.Contended,
		BaselineImpl: t.Baseline, ServerTime: t.ServerTimeKind, Dlock: es[0].tally.measure(es[0].side)}
	if w.Contended {
		n := 1
		for ; n < len(es) && es[n].side == &t.Dlock; n++ {
			c.DlockAlso = append(c.DlockAlso, Candidate{Name: es[n].name, Extra: true, Measure: es[n].tally.measure(es[n].side)})
		}
		c.pickBest(es[n:])
	} else {
		c.Baseline = es[1].tally.measure(es[1].side)
	}
	if len(writes) > 0 {
		c.WriteP50Ms, c.Write = ms(benchwork.Percentile(writes, 50)), t.WriteKind
	}
	if c.Baseline.PerSec > 0 {
		c.Ratio = c.Dlock.PerSec / c.Baseline.PerSec
	}
	return c, nil
}

// entrants lists what w measures: dlock first, then the baseline (each
// side's contenders in order, when contended: dlock's own first way, its
// others, then the baseline's; each is set up for its rounds by round).
// Uncontended, each side's pooled connections are warmed first.
func (t *Target) entrants(ctx context.Context, w Workload, cfg Config) []*entrant {
	var es []*entrant
	for i, s := range []*Side{&t.Dlock, &t.Base} {
		if !w.Contended {
			// Warm every pooled connection (prepared statements, scripts)
			// before anything is counted.
			benchwork.RunCycles(ctx, benchwork.Count(4*w.Goroutines), w.Goroutines,
				fmt.Sprintf("%swarm/%s/%d/", cfg.Prefix, w.Name, i), s.Cycle, benchwork.GoOn)
			es = append(es, newEntrant(t, s, "", false))
			continue
		}
		for j := range s.Contenders {
			ct := &s.Contenders[j]
			e := newEntrant(t, s, ct.Name, ct.Extra)
			e.contender, e.lockName = ct, fmt.Sprintf("%s%s/%d.%d/lock", cfg.Prefix, w.Name, i, j)
			es = append(es, e)
		}
	}
	return es
}

func newEntrant(t *Target, s *Side, name string, extra bool) *entrant {
	e := &entrant{side: s, name: name, extra: extra}
	e.tally.serverOK = t.ServerTime != nil
	_, e.tally.clientOK = benchwork.ProcessCPU()
	return e
}

// pickBest fills the contended comparison's Candidates from the
// baseline's entrants and makes the best of them (the highest rate of
// those not Extra and without a violation) its Baseline.
func (c *Comparison) pickBest(es []*entrant) {
	best := -1
	for i, e := range es {
		m := e.tally.measure(e.side)
		c.Candidates = append(c.Candidates, Candidate{Name: e.name, Extra: e.extra, Measure: m})
		if !e.extra && m.Violations == 0 && (best < 0 || m.PerSec > c.Candidates[best].Measure.PerSec) {
			best = i
		}
	}
	if best < 0 {
		c.BaselineImpl = "no baseline candidate without violations"
		return
	}
	c.Candidates[best].Best = true
	c.Baseline, c.BaselineImpl = c.Candidates[best].Measure, c.Candidates[best].Name
}

// SetUpContenders sets up one contender's workers for a round of a
// contended workload (the caller tears them down), and has each take and release the lock once, then
// all contend briefly, before anything is counted: its connections,
// sessions and subscriptions are then up, as in the long-running processes the workload stands for. The
// round's end tears them down, so that one way of waiting's connections
// do not weigh on another's rounds: PostgreSQL wakes every LISTENing
// connection of the database at each NOTIFY, and 16 idle Lockers'
// listeners beside one shared Locker halved its critical sections a
// second (2,393 alone, 1,158 beside them, lease mode, in one run).
func SetUpContenders(ctx context.Context, ct Contender, w Workload, name string) (benchwork.Lock, func(), error) {
	lock, teardown, err := ct.Contend(ctx, w.Goroutines, name)
	if err != nil {
		return nil, func() {}, fmt.Errorf("%s: %s: set up %d contenders: %w", w.Name, ct.Name, w.Goroutines, err)
	}
	for worker := range w.Goroutines {
		release, err := lock(ctx, worker)
		if err == nil {
			err = release(ctx)
		}
		if err != nil {
			teardown()
			return nil, func() {}, fmt.Errorf("%s: %s: warm contender %d: %w", w.Name, ct.Name, worker, err)
		}
	}
	// And contend briefly, so that what a waiter sets up on its first
	// wait (a listening connection, a watch) is up before the count.
	RunContended(ctx, w, lock, benchwork.Count(4*w.Goroutines))
	return lock, teardown, nil
}

// RunContended runs w's contended workload on lock for budget, as a
// round of a comparison does: its workers go on after a failure, and the
// waits under way at a timed budget's end drain.
func RunContended(ctx context.Context, w Workload, lock benchwork.Lock, budget benchwork.Budget) *benchwork.Contention {
	return benchwork.RunContended(ctx, budget, benchwork.Contend{Workers: w.Goroutines, OnError: benchwork.GoOn, Drain: drain}, lock)
}

// round runs one entrant for one round's budget and adds it to its
// tally; a contended entrant's workers are set up for the round and torn
// down after it.
func (t *Target) round(ctx context.Context, w Workload, e *entrant, budget benchwork.Budget, name string) error {
	tl := &e.tally
	run := func() {
		tl.cycles = tl.cycles.Merge(benchwork.RunCycles(ctx, budget, w.Goroutines, name, e.side.Cycle, benchwork.GoOn))
	}
	if w.Contended {
		lock, teardown, err := SetUpContenders(ctx, *e.contender, w, e.lockName)
		if err != nil {
			return err
		}
		defer teardown()
		run = func() {
			c := RunContended(ctx, w, lock, budget)
			if tl.contention == nil {
				tl.contention = c
			} else {
				tl.contention = tl.contention.Merge(c)
			}
		}
	}
	rt0, srv0 := t.probe(ctx, e.side, tl)
	cpu0, _ := benchwork.ProcessCPU()
	run()
	cpu1, _ := benchwork.ProcessCPU()
	rt1, srv1 := t.probe(ctx, e.side, tl)
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
