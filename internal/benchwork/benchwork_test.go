package benchwork_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/internal/benchwork"
	"github.com/dlockdev/dlock/memlock"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

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

func TestRunCyclesTimed(t *testing.T) {
	c := benchwork.RunCycles(context.Background(), benchwork.For(100*time.Millisecond), 2, "p/", func(context.Context, string) error {
		time.Sleep(time.Millisecond)
		return nil
	}, benchwork.Stop)
	if c.Elapsed < 100*time.Millisecond || c.N == 0 || c.N != len(c.Latencies) {
		t.Fatalf("timed run: elapsed %v, N %d, latencies %d", c.Elapsed, c.N, len(c.Latencies))
	}
	if c.Elapsed > time.Second {
		t.Errorf("a 100ms budget ran %v", c.Elapsed)
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
	if sum != 200 || len(c.Handoffs) == 0 || c.Fairness() <= 0 || c.Rate() <= 0 {
		t.Errorf("counts %v, handoffs %d, fairness %v, rate %v", c.Counts, len(c.Handoffs), c.Fairness(), c.Rate())
	}
}

func TestRunContendedTimedCancelsWaits(t *testing.T) {
	ls := memLockers(t, 3)
	lock := benchwork.Acquire(ls, "one", dlock.WithTTL(5*time.Second), dlock.WithWait(dlock.Forever))
	// Each holder keeps the lock 300 ms, so waits are under way when the
	// 100 ms budget ends: they must end with it, and not count as failures.
	start := time.Now()
	c := benchwork.RunContended(context.Background(), benchwork.For(100*time.Millisecond),
		benchwork.Contend{Workers: 3, Hold: 300 * time.Millisecond}, lock)
	if c.Failed != 0 || c.N != 1 || c.Violations != 0 {
		t.Errorf("failed %d (%v), grants %d, violations %d; want 0, 1, 0", c.Failed, c.Err, c.N, c.Violations)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("run took %v: waits outlived the budget", el)
	}
}

// TestRunContendedCountsViolations: a "lock" that excludes nobody must be
// caught, or the violation count is blind.
func TestRunContendedCountsViolations(t *testing.T) {
	noLock := func(context.Context, int) (func(context.Context) error, error) {
		return func(context.Context) error { return nil }, nil
	}
	c := benchwork.RunContended(context.Background(), benchwork.Count(8),
		benchwork.Contend{Workers: 4, Hold: 50 * time.Millisecond}, noLock)
	if c.Violations == 0 {
		t.Fatalf("4 workers holding a non-lock 50 ms each: no violation counted")
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
	cfg := benchwork.Contend{Workers: 4, Hold: 5 * time.Millisecond, Permits: 2}
	c := benchwork.RunContended(context.Background(), benchwork.Count(100), cfg, benchwork.AcquirePermit(sems))
	if c.Violations != 0 || c.Failed != 0 || len(c.Waits) != 100 || c.MaxHolders != 2 {
		t.Fatalf("violations %d, failed %d (%v), grants %d, most holders %d; want 0, 0, 100, 2",
			c.Violations, c.Failed, c.Err, len(c.Waits), c.MaxHolders)
	}
	noLock := func(context.Context, int) (func(context.Context) error, error) {
		return func(context.Context) error { return nil }, nil
	}
	cfg.Hold = 50 * time.Millisecond
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
	h, err := benchwork.Hold{
		Locker: l, Counter: rc, N: 50, Workers: 4, Prefix: "hold/",
		For: 700 * time.Millisecond, Opts: []dlock.Option{dlock.WithTTL(300 * time.Millisecond)},
		Mark: func(held bool) { marks = append(marks, held) },
	}.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// Refreshes come at TTL/3 = 100 ms: 700 ms is about 7 per lease.
	if h.Leases != 50 || h.Lost != 0 || h.Refreshes < 50*3 || h.Calls == 0 || h.Calls > h.Refreshes {
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

func TestProcessCPU(t *testing.T) {
	c0, ok := benchwork.ProcessCPU()
	if !ok {
		t.Skip("no process CPU time on this platform")
	}
	x := 0
	for start := time.Now(); time.Since(start) < 100*time.Millisecond; {
		x++
	}
	c1, _ := benchwork.ProcessCPU()
	// 100 ms of spinning on a loaded machine: at least some of it on a CPU.
	if c1-c0 < 10*time.Millisecond {
		t.Errorf("CPU time went from %v to %v over 100 ms of spinning (%d loops)", c0, c1, x)
	}
}
