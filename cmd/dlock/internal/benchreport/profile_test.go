package benchreport_test

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/google/pprof/profile"

	"github.com/dlockdev/dlock/cmd/dlock/internal/benchreport"
)

// profileFixture is a small Profiles: a backend with a measured floor
// and a tool that is not installed, and one without a load tool; the
// first and a third, whose uncontended targets are met, profiled
// contended too.
func profileFixture() *benchreport.Profiles {
	return &benchreport.Profiles{Measured: "2026-01-02", Machine: "2 × Test CPU", Goroutines: 16, SecondsPerSide: 3,
		Backends: []benchreport.BackendProfile{
			{Backend: "redis",
				Dlock: benchreport.SideProfile{Cycles: 30000, CyclesPerSec: 10000, SampleSeconds: 1.5, AllocPct: 18.9, GCPct: 7.2, Top: []benchreport.ProfileEntry{
					{Function: "unix.Syscall6", FlatPct: 40, CumPct: 40}, {Function: "redislock.(*driver).TryAcquire", FlatPct: 5.25, CumPct: 60}}},
				Baseline: benchreport.SideProfile{Cycles: 60000, CyclesPerSec: 20000, SampleSeconds: 1.2, Top: []benchreport.ProfileEntry{
					{Function: "unix.Syscall6", FlatPct: 55, CumPct: 55}}},
				Floors: []benchreport.Floor{
					{Tool: "redis-benchmark", What: "16 clients", PerSec: 95907.93, Unit: "requests/s"},
					{Tool: "redis-benchmark", What: "-P 16", NotRun: "not installed"},
				},
				Contended: &benchreport.ContendedProfile{Workers: 16, Seconds: 3, BaselineWay: "poll every 100µs",
					Dlock: benchreport.SideProfile{Cycles: 9000, CyclesPerSec: 3000, SampleSeconds: 2.7, Top: []benchreport.ProfileEntry{
						{Function: "runtime.futex", FlatPct: 12, CumPct: 12}}},
					Baseline: benchreport.SideProfile{Cycles: 6000, CyclesPerSec: 2000, SampleSeconds: 2.4, Errors: 1, Top: []benchreport.ProfileEntry{
						{Function: "unix.Syscall6", FlatPct: 61, CumPct: 61}, {Function: "time.Sleep", FlatPct: 3, CumPct: 9}}}}},
			{Backend: "etcd", NoFloor: "etcd has no packaged load tool; no floor",
				Dlock:    benchreport.SideProfile{Cycles: 3000, CyclesPerSec: 1000, SampleSeconds: 0.9, Errors: 2},
				Baseline: benchreport.SideProfile{Cycles: 6000, CyclesPerSec: 2000, SampleSeconds: 0.6}},
			{Backend: "zookeeper", NoFloor: "no load tool for this backend",
				Contended: &benchreport.ContendedProfile{Workers: 16, Seconds: 3, BaselineWay: "zk.NewLock",
					Dlock:    benchreport.SideProfile{Cycles: 300, CyclesPerSec: 100, SampleSeconds: 0.3},
					Baseline: benchreport.SideProfile{Cycles: 600, CyclesPerSec: 200, SampleSeconds: 0.3}}},
		}}
}

// TestWriteProfilesMarkdown: each backend's sides are side by side, a
// row per rank, the shorter side's cells empty past its end; the client
// CPU a cycle is the sampled time over the cycles; a floor not run says
// why, and a backend without a load tool says so.
func TestWriteProfilesMarkdown(t *testing.T) {
	var b bytes.Buffer
	if err := benchreport.WriteProfilesMarkdown(&b, profileFixture()); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"Measured 2026-01-02 on 2 × Test CPU. Each side ran the uncontended workload alone, 16 goroutines for 3 s",
		"the servers are other processes, so a profile is the client's CPU only",
		"**redis**: dlock 10000 cycles/s, 50 µs of client CPU a cycle (1.5 s sampled; allocating 19%, GC marking 7%); baseline 20000 cycles/s, 20 µs a cycle (1.2 s; 0%, 0%).\n",
		"| 1 | `unix.Syscall6` | 40.0 | 40.0 | `unix.Syscall6` | 55.0 | 55.0 |\n",
		"| 2 | `redislock.(*driver).TryAcquire` | 5.2 | 60.0 |  |  |  |\n",
		"Floor: redis-benchmark, 16 clients: **95908** requests/s; redis-benchmark, -P 16: not installed.\n",
		"**etcd**: dlock 1000 cycles/s, 300 µs of client CPU a cycle (0.9 s sampled; allocating 0%, GC marking 0%); baseline 2000 cycles/s, 100 µs a cycle (0.6 s; 0%, 0%); failed cycles: dlock 2, baseline 0.\n",
		"Floor: etcd has no packaged load tool; no floor.\n",
		"Contended, 16 workers for 3 s: dlock 3000 critical sections/s, 300 µs of client CPU a critical section (2.7 s sampled; allocating 0%, GC marking 0%); " +
			"baseline, poll every 100µs, 2000/s, 400 µs (2.4 s; 0%, 0%); failed acquires and releases: dlock 0, baseline 1.\n",
		"| 2 |  |  |  | `time.Sleep` | 3.0 | 9.0 |\n",
		"**zookeeper**: its uncontended targets are met.\n\nContended, 16 workers for 3 s: dlock 100 critical sections/s, 1000 µs",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "| # | dlock: function |"); n != 2 {
		t.Errorf("%d tables, want two for the backend with profiles (uncontended, contended) and none for the others:\n%s", n, out)
	}
}

// TestProfileBlockCatchesChanges: the rendered block follows the results
// it is rendered from.
func TestProfileBlockCatchesChanges(t *testing.T) {
	p := profileFixture()
	render := func() string {
		s, err := benchreport.ProfileBlocks(".", p)[0].Render()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	before := render()
	p.Backends[0].Baseline.Top[0].FlatPct = 54
	if render() == before {
		t.Error("a changed flat share renders the same block")
	}
}

// cpuProfile builds a CPU profile of samples, each a stack of function
// names (leaf first; "a+b" is a location where a is inlined into b) and
// its nanoseconds.
func cpuProfile(samples map[string]int64) *profile.Profile {
	p := &profile.Profile{SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}}}
	funcs := map[string]*profile.Function{}
	fn := func(name string) *profile.Function {
		if funcs[name] == nil {
			funcs[name] = &profile.Function{ID: uint64(len(funcs) + 1), Name: name}
			p.Function = append(p.Function, funcs[name])
		}
		return funcs[name]
	}
	for stack, ns := range samples {
		s := &profile.Sample{Value: []int64{1, ns}}
		for frame := range strings.SplitSeq(stack, ";") {
			loc := &profile.Location{ID: uint64(len(p.Location) + 1)}
			for name := range strings.SplitSeq(frame, "+") {
				loc.Line = append(loc.Line, profile.Line{Function: fn(name)})
			}
			p.Location = append(p.Location, loc)
			s.Location = append(s.Location, loc)
		}
		p.Sample = append(p.Sample, s)
	}
	return p
}

// TestTopFunctions: flat samples go to the innermost function of the
// leaf location (an inlined one included), cum counts a function once a
// sample however often it recurs, names lose their import path, and the
// list is cut at n, most flat first, ties by name.
func TestTopFunctions(t *testing.T) {
	p := cpuProfile(map[string]int64{
		"golang.org/x/sys/unix.Syscall6;net.(*conn).Read;github.com/dlockdev/dlock.(*Locker).TryAcquire": 500e6,
		"runtime.memmove+bytes.(*Buffer).Write;github.com/dlockdev/dlock.(*Locker).TryAcquire":           200e6,
		"main.f;main.f;main.g": 200e6,
		"main.h":               100e6,
	})
	top, sampled, err := benchreport.TopFunctions(p, 3)
	if err != nil {
		t.Fatal(err)
	}
	if sampled != 1.0 {
		t.Errorf("sampled %v s, want 1", sampled)
	}
	want := []benchreport.ProfileEntry{
		{Function: "unix.Syscall6", FlatPct: 50, CumPct: 50},
		{Function: "main.f", FlatPct: 20, CumPct: 20},
		{Function: "runtime.memmove", FlatPct: 20, CumPct: 20},
	}
	if len(top) != len(want) {
		t.Fatalf("top = %+v, want %+v", top, want)
	}
	for i := range want {
		g := top[i]
		if g.Function != want[i].Function || math.Abs(g.FlatPct-want[i].FlatPct) > 1e-9 || math.Abs(g.CumPct-want[i].CumPct) > 1e-9 {
			t.Errorf("top[%d] = %+v, want %+v", i, g, want[i])
		}
	}
	all, _, _ := benchreport.TopFunctions(p, 10)
	for _, e := range all {
		if e.Function == "dlock.(*Locker).TryAcquire" {
			t.Errorf("a function with no flat samples is listed: %+v", e)
		}
	}
}

// TestSummarize: the allocation and GC shares are cum shares of their
// functions, wherever on the stack.
func TestSummarize(t *testing.T) {
	p := cpuProfile(map[string]int64{
		"runtime.nextFreeFast+runtime.mallocgc;main.f":              300e6,
		"runtime.scanobject;runtime.gcDrain;runtime.gcBgMarkWorker": 100e6,
		"unix.Syscall6;main.g":                                      600e6,
	})
	s, err := benchreport.Summarize(p, 2)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(s.AllocPct-30) > 1e-9 || math.Abs(s.GCPct-10) > 1e-9 || len(s.Top) != 2 || s.SampleSeconds != 1 {
		t.Errorf("Summarize = %+v, want allocating 30%%, GC marking 10%%, 2 entries, 1 s", s)
	}
}

// TestTopFunctionsRejects: a profile that is not of CPU time, or has no
// samples, is an error that says so.
func TestTopFunctionsRejects(t *testing.T) {
	heap := &profile.Profile{SampleType: []*profile.ValueType{{Type: "alloc_space", Unit: "bytes"}}}
	if _, _, err := benchreport.TopFunctions(heap, 8); err == nil || !strings.Contains(err.Error(), "alloc_space/bytes") {
		t.Errorf("a heap profile: err = %v, want one naming its sample type", err)
	}
	if _, _, err := benchreport.TopFunctions(cpuProfile(nil), 8); err == nil || !strings.Contains(err.Error(), "no samples") {
		t.Errorf("an empty profile: err = %v", err)
	}
}
