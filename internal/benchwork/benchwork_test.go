package benchwork_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/internal/benchwork"
	"github.com/dlockdev/dlock/memlock"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(envLeaderURL) != "" {
		leaderMain()
	}
	goleak.VerifyTestMain(m)
}

func TestPercentile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		d := make([]time.Duration, len(v))
		for i, x := range v {
			d[i] = time.Duration(x) * time.Millisecond
		}
		return d
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i // 100..1, unsorted
	}
	for _, tc := range []struct {
		in   []time.Duration
		p    int
		want time.Duration
	}{
		{nil, 50, 0},
		{ms(7), 99, 7 * time.Millisecond},
		{ms(3, 1, 2), 50, 2 * time.Millisecond},
		{ms(hundred...), 50, 51 * time.Millisecond},
		{ms(hundred...), 99, 100 * time.Millisecond},
		{ms(hundred...), 0, time.Millisecond},
		{ms(hundred...), 100, 100 * time.Millisecond},
	} {
		in := append([]time.Duration(nil), tc.in...)
		if got := benchwork.Percentile(tc.in, tc.p); got != tc.want {
			t.Errorf("Percentile(%v, %d) = %v, want %v", tc.in, tc.p, got, tc.want)
		}
		for i := range in {
			if in[i] != tc.in[i] {
				t.Fatalf("Percentile sorted its input")
			}
		}
	}
}

func TestFairness(t *testing.T) {
	for _, tc := range []struct {
		counts []int
		want   float64
	}{
		{nil, 0},
		{[]int{0, 0}, 0},
		{[]int{5, 5, 5}, 1},
		{[]int{2, 8, 4}, 0.25},
		{[]int{0, 3}, 0},
	} {
		if got := benchwork.Fairness(tc.counts); got != tc.want {
			t.Errorf("Fairness(%v) = %v, want %v", tc.counts, got, tc.want)
		}
	}
}

func TestRunCyclesCount(t *testing.T) {
	var calls atomic.Int64
	names := sync.Map{}
	c := benchwork.RunCycles(context.Background(), benchwork.Count(300), 4, "p/", func(_ context.Context, name string) error {
		calls.Add(1)
		names.Store(name, true)
		return nil
	}, benchwork.Stop)
	if calls.Load() != 300 || c.N != 300 || c.Failed != 0 || len(c.Latencies) != 300 || c.Rate() <= 0 {
		t.Fatalf("calls %d, result N=%d failed=%d latencies=%d rate=%v", calls.Load(), c.N, c.Failed, len(c.Latencies), c.Rate())
	}
	valid := map[string]bool{}
	for i := range 4 {
		valid[benchwork.Name("p/", i)] = true
	}
	names.Range(func(k, _ any) bool {
		if !valid[k.(string)] {
			t.Errorf("cycle on %q, not a worker's name", k)
		}
		return true
	})
}

// TestRunCyclesTimed checks a timed budget by order, not speed: every
// worker's first cycle outlasts the budget (it sleeps the budget's length
// from its own start, which is after the budget began), so no worker may
// start a second; each started cycle runs to its end under the caller's
// context, is counted once, and the run's time covers its longest cycle.
func TestRunCyclesTimed(t *testing.T) {
	const budget, workers = 100 * time.Millisecond, 2
	var calls atomic.Int64
	var canceled atomic.Int64
	c := benchwork.RunCycles(context.Background(), benchwork.For(budget), workers, "p/", func(ctx context.Context, _ string) error {
		calls.Add(1)
		time.Sleep(budget)
		if ctx.Err() != nil {
			canceled.Add(1)
		}
		return nil
	}, benchwork.Stop)
	if c.N != int(calls.Load()) || c.N != len(c.Latencies) || c.Failed != 0 {
		t.Fatalf("timed run: N %d, cycles called %d, latencies %d, failed %d", c.N, calls.Load(), len(c.Latencies), c.Failed)
	}
	if c.N > workers {
		t.Errorf("%d cycles started by %d workers whose first cycle outlasted the budget: a cycle started after the end", c.N, workers)
	}
	if canceled.Load() > 0 {
		t.Errorf("%d cycles saw their context canceled: a cycle was cut off by the budget", canceled.Load())
	}
	if c.N > 0 && c.Elapsed < slices.Max(c.Latencies) {
		t.Errorf("run took %v, less than its longest cycle %v", c.Elapsed, slices.Max(c.Latencies))
	}
}

func TestRunCyclesFailures(t *testing.T) {
	boom := errors.New("boom")
	var n atomic.Int64
	failOdd := func(context.Context, string) error {
		if n.Add(1)%2 == 1 {
			return boom
		}
		return nil
	}
	c := benchwork.RunCycles(context.Background(), benchwork.Count(100), 1, "p/", failOdd, benchwork.GoOn)
	if c.Failed != 50 || len(c.Latencies) != 50 || !errors.Is(c.Err, boom) {
		t.Errorf("GoOn: failed %d, ok %d, err %v", c.Failed, len(c.Latencies), c.Err)
	}
	n.Store(0)
	c = benchwork.RunCycles(context.Background(), benchwork.Count(100), 1, "p/", failOdd, benchwork.Stop)
	if c.Failed != 1 || len(c.Latencies) != 0 {
		t.Errorf("Stop: failed %d, ok %d", c.Failed, len(c.Latencies))
	}
}

// memLockers returns n Lockers on one in-process store.
func memLockers(t *testing.T, n int) []*dlock.Locker {
	t.Helper()
	store := memlock.NewStore()
	ls := make([]*dlock.Locker, n)
	for i := range ls {
		l, err := memlock.New(store)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		ls[i] = l
	}
	return ls
}

func TestRunContendedOnMemlock(t *testing.T) {
	ls := memLockers(t, 4)
	lock := benchwork.Acquire(ls, "one", dlock.WithTTL(5*time.Second), dlock.WithWait(dlock.Forever))
	c := benchwork.RunContended(context.Background(), benchwork.Count(200), benchwork.Contend{Workers: 4}, lock)
	if c.Violations != 0 || c.Failed != 0 || len(c.Waits) != 200 {
		t.Fatalf("violations %d, failed %d (%v), grants %d", c.Violations, c.Failed, c.Err, len(c.Waits))
	}
	sum := 0
	for _, n := range c.Counts {
		sum += n
	}
	if sum != 200 || len(c.Counts) != 4 || len(c.Handoffs) == 0 || c.Fairness() < 0 || c.Fairness() > 1 || c.Rate() <= 0 {
		t.Errorf("counts %v, handoffs %d, fairness %v, rate %v", c.Counts, len(c.Handoffs), c.Fairness(), c.Rate())
	}
}

// entered is a mutex on a channel that grants a free lock without
// looking at the context (so the first worker to arrive always gets it)
// and counts the workers that asked.
type entered struct {
	sem   chan struct{}
	asked atomic.Int64
}

func newEntered() *entered { return &entered{sem: make(chan struct{}, 1)} }

func (e *entered) lock(ctx context.Context, _ int) (func(context.Context) error, error) {
	e.asked.Add(1)
	release := func(context.Context) error { <-e.sem; return nil }
	select {
	case e.sem <- struct{}{}:
		return release, nil
	default:
	}
	select {
	case e.sem <- struct{}{}:
		return release, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// pastTheEnd is a Critical whose first call sleeps the budget's length:
// the budget began before that call, so the holder releases after the
// end, while every other worker that asked is still waiting.
func pastTheEnd(budget time.Duration) func(int) {
	var once sync.Once
	return func(int) { once.Do(func() { time.Sleep(budget) }) }
}

// TestRunContendedTimedCancelsWaits: the waits under way at a timed
// budget's end end with it, and do not count as failures. The first
// worker to ask holds the lock until the run's context ends; the others
// wait for nothing but that context, so the run returns only if the
// budget's end cancels their waits.
func TestRunContendedTimedCancelsWaits(t *testing.T) {
	var asked atomic.Int64
	runCtx := make(chan context.Context, 1)
	lock := func(ctx context.Context, _ int) (func(context.Context) error, error) {
		if asked.Add(1) == 1 {
			runCtx <- ctx
			return func(context.Context) error { return nil }, nil
		}
		<-ctx.Done()
		return nil, ctx.Err()
	}
	holdToTheEnd := func(int) { ctx := <-runCtx; <-ctx.Done() }
	c := benchwork.RunContended(context.Background(), benchwork.For(200*time.Millisecond),
		benchwork.Contend{Workers: 3, Critical: holdToTheEnd}, lock)
	want := min(1, int(asked.Load()))
	if c.Failed != 0 || c.N != want || c.Violations != 0 {
		t.Errorf("failed %d (%v), grants %d, violations %d; %d workers asked: want 0, %d, 0", c.Failed, c.Err, c.N, c.Violations, asked.Load(), want)
	}
}

// TestRunContendedDrain: with Drain, the waits under way at a timed
// budget's end are granted and counted, and no wait starts after it: the
// first holder keeps the lock past the end, so every worker that asked
// (once each) is granted once.
func TestRunContendedDrain(t *testing.T) {
	const budget = 200 * time.Millisecond
	e := newEntered()
	c := benchwork.RunContended(context.Background(), benchwork.For(budget),
		benchwork.Contend{Workers: 3, Critical: pastTheEnd(budget), Drain: time.Minute}, e.lock)
	if c.Failed != 0 || c.N != int(e.asked.Load()) || c.Violations != 0 {
		t.Errorf("failed %d (%v), grants %d, violations %d; %d workers asked: want 0, as many grants, 0", c.Failed, c.Err, c.N, c.Violations, e.asked.Load())
	}
	if c.N > 3 {
		t.Errorf("%d grants to 3 workers: a wait started after the budget's end", c.N)
	}
}

// together returns a Critical that holds its callers, the first time,
// until n of them are in their critical sections at once: an overlap of
// n holders forced by order, not by sleeping and hoping.
func together(n int) func(int) {
	var mu sync.Mutex
	in, done := 0, make(chan struct{})
	return func(int) {
		mu.Lock()
		select {
		case <-done:
			mu.Unlock()
			return
		default:
		}
		if in++; in == n {
			close(done)
		}
		mu.Unlock()
		<-done
	}
}

// noLock is a "lock" that excludes nobody.
func noLock(context.Context, int) (func(context.Context) error, error) {
	return func(context.Context) error { return nil }, nil
}

// TestRunContendedCountsViolations: a "lock" that excludes nobody must be
// caught, or the violation count is blind.
func TestRunContendedCountsViolations(t *testing.T) {
	c := benchwork.RunContended(context.Background(), benchwork.Count(8),
		benchwork.Contend{Workers: 4, Critical: together(2)}, noLock)
	if c.Violations == 0 {
		t.Fatalf("2 of 4 workers holding a non-lock at once: no violation counted")
	}
}

// TestRunContendedPermits: on a semaphore of 2 permits, 4 workers hold
// at most 2 at once (and do reach 2); a non-lock is caught exceeding them.
func TestRunContendedPermits(t *testing.T) {
	ls := memLockers(t, 4)
	sems := make([]*dlock.Semaphore, len(ls))
	for i, l := range ls {
		s, err := l.Semaphore("pool", 2, dlock.WithTTL(5*time.Second), dlock.WithWait(dlock.Forever))
		if err != nil {
			t.Fatal(err)
		}
		sems[i] = s
	}
	cfg := benchwork.Contend{Workers: 4, Permits: 2, Critical: together(2)}
	c := benchwork.RunContended(context.Background(), benchwork.Count(100), cfg, benchwork.AcquirePermit(sems))
	if c.Violations != 0 || c.Failed != 0 || len(c.Waits) != 100 || c.MaxHolders != 2 {
		t.Fatalf("violations %d, failed %d (%v), grants %d, most holders %d; want 0, 0, 100, 2",
			c.Violations, c.Failed, c.Err, len(c.Waits), c.MaxHolders)
	}
	cfg.Critical = together(3)
	c = benchwork.RunContended(context.Background(), benchwork.Count(8), cfg, noLock)
	if c.Violations == 0 || c.MaxHolders <= 2 {
		t.Fatalf("4 workers holding a non-semaphore of 2: violations %d, most holders %d", c.Violations, c.MaxHolders)
	}
}

func TestMerge(t *testing.T) {
	a := benchwork.Cycles{N: 10, Failed: 1, Elapsed: time.Second, Latencies: make([]time.Duration, 9)}
	b := benchwork.Cycles{N: 30, Failed: 0, Elapsed: time.Second, Latencies: make([]time.Duration, 30)}
	m := a.Merge(b)
	if m.N != 40 || m.Failed != 1 || m.Elapsed != 2*time.Second || len(m.Latencies) != 39 || m.Rate() != 19.5 {
		t.Errorf("merged cycles %+v rate %v", m, m.Rate())
	}
	x := &benchwork.Contention{Counts: []int{1, 2}, Waits: make([]time.Duration, 3), Elapsed: time.Second}
	y := &benchwork.Contention{Counts: []int{3, 2}, Waits: make([]time.Duration, 5), Elapsed: time.Second, Violations: 1}
	z := x.Merge(y)
	if z.Counts[0] != 4 || z.Counts[1] != 4 || z.Fairness() != 1 || z.Rate() != 4 || z.Violations != 1 {
		t.Errorf("merged contention counts %v rate %v violations %d", z.Counts, z.Rate(), z.Violations)
	}
}

func TestHoldCountsRefreshes(t *testing.T) {
	l0 := memLockers(t, 1)[0]
	rc := benchwork.CountRefreshes(l0.Driver())
	l, err := dlock.NewLocker(rc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	var marks []bool
	// A 3 s TTL is refreshed every second: held 2.5 s, each lease is
	// refreshed at least once unless its first refresh is 1.5 s late, and
	// lost only if no refresh comes for 3 s.
	h, err := benchwork.Hold{
		Locker: l, Counter: rc, N: 50, Workers: 4, Prefix: "hold/",
		For: 2500 * time.Millisecond, Opts: []dlock.Option{dlock.WithTTL(3 * time.Second)},
		Mark: func(held bool) { marks = append(marks, held) },
	}.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if h.Leases != 50 || h.Lost != 0 || h.Refreshes < 50 || h.Calls == 0 || h.Calls > h.Refreshes {
		t.Errorf("holding %+v", h)
	}
	if len(marks) != 2 || !marks[0] || marks[1] {
		t.Errorf("marks %v, want [true false]", marks)
	}
	if ls, err := l0.List(context.Background(), "hold/"); err != nil || len(ls) != 0 {
		t.Errorf("after the hold, %d leases still held (%v)", len(ls), err)
	}
}

func TestHoldRejectsZero(t *testing.T) {
	if _, err := (benchwork.Hold{N: 0, Workers: 1}).Run(context.Background()); err == nil {
		t.Error("a hold of 0 leases was accepted")
	}
}

// TestProcessCPU: spinning makes the process's CPU time grow. It spins
// until the reading has grown by 10 ms, however long the machine's load
// makes that take, and fails only if it never does (a minute).
func TestProcessCPU(t *testing.T) {
	c0, ok := benchwork.ProcessCPU()
	if !ok {
		t.Skip("no process CPU time on this platform")
	}
	x := 0
	for start := time.Now(); time.Since(start) < time.Minute; {
		for range 1_000_000 {
			x++
		}
		if c1, _ := benchwork.ProcessCPU(); c1-c0 >= 10*time.Millisecond {
			return
		}
	}
	c1, _ := benchwork.ProcessCPU()
	t.Errorf("CPU time went from %v to %v over a minute of spinning (%d loops)", c0, c1, x)
}
