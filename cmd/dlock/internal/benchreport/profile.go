package benchreport

import (
	"bytes"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"

	"github.com/google/pprof/profile"

	"github.com/dlockdev/dlock/internal/docblock"
)

// ProfilesFile holds what `make bench-profile` measured, relative to the
// repository's root; ProfileBlock names the block of DocFile rendered
// from it.
const (
	ProfilesFile = "docs/profiles.json"
	ProfileBlock = "bench-profile"
)

// ProfileTop is how many functions a side's profile keeps.
const ProfileTop = 8

// Profiles is what `make bench-profile` measured, kept in the committed
// file docs/profiles.json: for every backend that misses an uncontended
// target, the client's CPU profile on each side of that workload and the
// rate a standard load tool reaches against the same server; for every
// backend that misses a contended target, each side's profile of the
// contended workload.
type Profiles struct {
	// Measured is the UTC day of the run; Machine where it ran.
	Measured string `json:"measured"`
	Machine  string `json:"machine"`
	// Goroutines and SecondsPerSide are the uncontended workload each
	// side ran alone, under the profiler.
	Goroutines     int     `json:"goroutines"`
	SecondsPerSide float64 `json:"seconds_per_side"`
	// Backends are the profiled backends, in the order of the summary.
	Backends []BackendProfile `json:"backends"`
}

// BackendProfile is one backend's profiles and floors.
type BackendProfile struct {
	// Backend is its Comparison.Backend.
	Backend string `json:"backend"`
	// Dlock and Baseline are each side's uncontended run; none (no
	// samples, no cycles) when the backend meets its uncontended targets.
	Dlock    SideProfile `json:"dlock"`
	Baseline SideProfile `json:"baseline"`
	// Contended is the contended workload's runs, when the backend misses
	// a contended target.
	Contended *ContendedProfile `json:"contended,omitempty"`
	// Floors are what standard load tools reached against the server;
	// NoFloor says why there are none.
	Floors  []Floor `json:"floors,omitempty"`
	NoFloor string  `json:"no_floor,omitempty"`
}

// ContendedProfile is the contended workload, each side alone under the
// CPU profiler: dlock's workers each with a Locker of their own (the
// way its ratio is measured), the baseline's waiting the way that was
// its best in the published results. A SideProfile's cycles are then
// critical sections.
type ContendedProfile struct {
	// Workers is how many workers contended, each pausing 1 ms after its
	// release; Seconds how long each side ran.
	Workers int     `json:"workers"`
	Seconds float64 `json:"seconds"`
	// BaselineWay names the baseline's way of waiting.
	BaselineWay string      `json:"baseline_way"`
	Dlock       SideProfile `json:"dlock"`
	Baseline    SideProfile `json:"baseline"`
}

// SideProfile is one side's run under the CPU profiler.
type SideProfile struct {
	// Cycles is the acquire+release cycles completed, CyclesPerSec those
	// a second; Errors the cycles that failed.
	Cycles       int     `json:"cycles"`
	CyclesPerSec float64 `json:"cycles_per_sec"`
	Errors       int     `json:"errors"`
	// SampleSeconds is the CPU time the profile sampled.
	SampleSeconds float64 `json:"sample_seconds"`
	// Top are the functions with the most flat samples, most first.
	Top []ProfileEntry `json:"top"`
	// AllocPct is the share of samples allocating (runtime.mallocgc on
	// the stack); GCPct the share of the garbage collector's background
	// marking (runtime.gcBgMarkWorker).
	AllocPct float64 `json:"alloc_pct"`
	GCPct    float64 `json:"gc_pct"`
}

// Functions whose cum share SideProfile keeps apart, by their short names.
const (
	AllocFunc  = "runtime.mallocgc"
	GCMarkFunc = "runtime.gcBgMarkWorker"
)

// CPUPerCycle is the client CPU the profile sampled per completed cycle,
// in µs; 0 when no cycle completed.
func (s SideProfile) CPUPerCycle() float64 {
	if s.Cycles == 0 {
		return 0
	}
	return s.SampleSeconds * 1e6 / float64(s.Cycles)
}

// ProfileEntry is one function of a profile.
type ProfileEntry struct {
	// Function is its name, without its package's import path.
	Function string `json:"function"`
	// FlatPct is the share of samples in the function itself; CumPct the
	// share with it anywhere on the stack.
	FlatPct float64 `json:"flat_pct"`
	CumPct  float64 `json:"cum_pct"`
}

// Floor is the rate a standard load tool reached against the server.
type Floor struct {
	// Tool is the program ("redis-benchmark"); What the load it sent.
	Tool string `json:"tool"`
	What string `json:"what"`
	// PerSec is its rate, in Unit; NotRun says why there is none (the
	// tool is not installed, or failed).
	PerSec float64 `json:"per_sec,omitempty"`
	Unit   string  `json:"unit,omitempty"`
	NotRun string  `json:"not_run,omitempty"`
}

// ReadProfiles reads a profiles file.
func ReadProfiles(path string) (*Profiles, error) { return readJSON[Profiles](path) }

// WriteProfiles writes p to path, indented, for review in a diff.
func WriteProfiles(path string, p *Profiles) error { return writeJSON(path, p) }

// TopFunctions are the n functions of a CPU profile with the most flat
// samples, most first (ties by name), and the CPU time it sampled.
// Inlined calls count as the functions they are.
func TopFunctions(p *profile.Profile, n int) ([]ProfileEntry, float64, error) {
	s, err := Summarize(p, n)
	return s.Top, s.SampleSeconds, err
}

// Summarize is what a side's CPU profile says: its top n functions by
// flat samples (TopFunctions), the CPU time sampled, and the shares of
// AllocFunc and GCMarkFunc. The rates and errors are left to the caller.
func Summarize(p *profile.Profile, n int) (SideProfile, error) {
	top, cum, total, err := functions(p, n)
	if err != nil {
		return SideProfile{}, err
	}
	pct := func(f string) float64 { return 100 * float64(cum[f]) / float64(total) }
	return SideProfile{SampleSeconds: float64(total) / 1e9, Top: top, AllocPct: pct(AllocFunc), GCPct: pct(GCMarkFunc)}, nil
}

// functions are the top n functions of p by flat samples, every
// function's cum samples, and the samples in all (CPU nanoseconds).
func functions(p *profile.Profile, n int) ([]ProfileEntry, map[string]int64, int64, error) {
	vi := -1
	for i, st := range p.SampleType {
		if st.Type == "cpu" && st.Unit == "nanoseconds" {
			vi = i
		}
	}
	if vi < 0 {
		var types []string
		for _, st := range p.SampleType {
			types = append(types, st.Type+"/"+st.Unit)
		}
		return nil, nil, 0, fmt.Errorf("not a CPU profile: its sample types are %s, none cpu/nanoseconds", strings.Join(types, ", "))
	}
	flat, cum := map[string]int64{}, map[string]int64{}
	var total int64
	for _, s := range p.Sample {
		v := s.Value[vi]
		total += v
		seen := map[string]bool{}
		for li, loc := range s.Location {
			for fi, line := range loc.Line {
				name := "?"
				if line.Function != nil {
					name = shortFunc(line.Function.Name)
				}
				if li == 0 && fi == 0 {
					flat[name] += v
				}
				if !seen[name] {
					seen[name] = true
					cum[name] += v
				}
			}
		}
	}
	if total == 0 {
		return nil, nil, 0, fmt.Errorf("the profile has no samples")
	}
	names := make([]string, 0, len(flat))
	for f := range flat {
		names = append(names, f)
	}
	sort.Slice(names, func(i, j int) bool {
		if flat[names[i]] != flat[names[j]] {
			return flat[names[i]] > flat[names[j]]
		}
		return names[i] < names[j]
	})
	names = names[:min(n, len(names))]
	top := make([]ProfileEntry, len(names))
	for i, f := range names {
		top[i] = ProfileEntry{Function: f, FlatPct: 100 * float64(flat[f]) / float64(total), CumPct: 100 * float64(cum[f]) / float64(total)}
	}
	return top, cum, total, nil
}

// shortFunc is a function's name without its package's import path
// ("github.com/jackc/pgx/v5/pgconn.(*PgConn).Exec" is "pgconn.(*PgConn).Exec").
func shortFunc(name string) string {
	paren := strings.IndexByte(name, '(')
	path := name
	if paren >= 0 {
		path = name[:paren]
	}
	if i := strings.LastIndexByte(path, '/'); i >= 0 {
		return name[i+1:]
	}
	return name
}

// profileNote opens the rendered profile block.
const profileNote = "<!-- Rendered from docs/profiles.json by `make bench-profile`; TestBenchDocsCurrent checks it. Do not edit. -->\n"

// ProfileBlocks are the blocks rendered from p in the repository at
// root: the profile block of docs/benchmarks.md.
func ProfileBlocks(root string, p *Profiles) []docblock.Block {
	return []docblock.Block{{File: filepath.Join(root, DocFile), Name: ProfileBlock, Render: func() (string, error) {
		var b bytes.Buffer
		b.WriteString(profileNote)
		err := WriteProfilesMarkdown(&b, p)
		return b.String(), err
	}}}
}

// WriteProfilesMarkdown writes p: per backend, both sides' rates and top
// functions side by side, uncontended then contended, and the floors the
// load tools reached.
func WriteProfilesMarkdown(w io.Writer, p *Profiles) error {
	fmt.Fprintf(w, "Measured %s on %s. Each side ran the uncontended workload alone, %d goroutines for %s, "+
		"under Go's CPU profiler; the servers are other processes, so a profile is the client's CPU only (the "+
		"benchmark's own loop included, alike on both sides). flat: samples in the function itself; cum: with it "+
		"anywhere on the stack; allocating: samples with "+AllocFunc+" on the stack; GC marking: in "+GCMarkFunc+". "+
		"Where a contended target is missed, each side also ran the contended workload alone under the profiler: "+
		"dlock's workers with a Locker each, the baseline's the way that was its best in the results above. "+
		"The floor is what the server's standard load tool, written in C, reached against "+
		"the same server: redis-benchmark counts requests (a cycle is two), pgbench transactions (a cycle each, or a "+
		"critical section where the floor is a contended one), and mysqlslap's time for its statements is given as "+
		"cycles (two statements each). A contended floor is the load tool on what bounds the contended workload: "+
		"the baseline's own way of waiting with no client code, or the server's cost of the message a hand-off sends.\n", p.Measured, p.Machine, p.Goroutines, seconds(p.SecondsPerSide))
	for _, b := range p.Backends {
		fmt.Fprintf(w, "\n**%s**", b.Backend)
		if b.Dlock.profiled() || b.Baseline.profiled() {
			fmt.Fprintf(w, ": dlock %.0f cycles/s, %.0f µs of client CPU a cycle (%.1f s sampled; allocating %.0f%%, GC marking %.0f%%); "+
				"baseline %.0f cycles/s, %.0f µs a cycle (%.1f s; %.0f%%, %.0f%%)%s.\n\n",
				b.Dlock.CyclesPerSec, b.Dlock.CPUPerCycle(), b.Dlock.SampleSeconds, b.Dlock.AllocPct, b.Dlock.GCPct,
				b.Baseline.CyclesPerSec, b.Baseline.CPUPerCycle(), b.Baseline.SampleSeconds, b.Baseline.AllocPct, b.Baseline.GCPct,
				failed("cycles", b.Dlock, b.Baseline))
			writeTops(w, b.Dlock, b.Baseline)
		} else {
			fmt.Fprint(w, ": its uncontended targets are met.\n\n")
		}
		if c := b.Contended; c != nil {
			fmt.Fprintf(w, "Contended, %d workers for %s: dlock %.0f critical sections/s, %.0f µs of client CPU a critical section "+
				"(%.1f s sampled; allocating %.0f%%, GC marking %.0f%%); baseline, %s, %.0f/s, %.0f µs (%.1f s; %.0f%%, %.0f%%)%s.\n\n",
				c.Workers, seconds(c.Seconds), c.Dlock.CyclesPerSec, c.Dlock.CPUPerCycle(), c.Dlock.SampleSeconds, c.Dlock.AllocPct, c.Dlock.GCPct,
				c.BaselineWay, c.Baseline.CyclesPerSec, c.Baseline.CPUPerCycle(), c.Baseline.SampleSeconds, c.Baseline.AllocPct, c.Baseline.GCPct,
				failed("acquires and releases", c.Dlock, c.Baseline))
			writeTops(w, c.Dlock, c.Baseline)
		}
		fmt.Fprintf(w, "Floor: %s\n", floorLine(b))
	}
	return nil
}

// profiled reports whether s was measured.
func (s SideProfile) profiled() bool { return s.Cycles > 0 || s.SampleSeconds > 0 || len(s.Top) > 0 }

// writeTops writes both sides' top functions side by side, a row per
// rank; nothing when neither has any.
func writeTops(w io.Writer, dlock, base SideProfile) {
	rows := max(len(dlock.Top), len(base.Top))
	if rows == 0 {
		return
	}
	fmt.Fprintln(w, "| # | dlock: function | flat % | cum % | baseline: function | flat % | cum % |")
	fmt.Fprintln(w, "|---:|---|---:|---:|---|---:|---:|")
	for i := range rows {
		fmt.Fprintf(w, "| %d | %s | %s |\n", i+1, entryCells(dlock.Top, i), entryCells(base.Top, i))
	}
	fmt.Fprintln(w)
}

// failed says how many of what failed on each side, if any did.
func failed(what string, dlock, base SideProfile) string {
	if dlock.Errors == 0 && base.Errors == 0 {
		return ""
	}
	return fmt.Sprintf("; failed %s: dlock %d, baseline %d", what, dlock.Errors, base.Errors)
}

// entryCells are the three cells of top[i], empty past its end.
func entryCells(top []ProfileEntry, i int) string {
	if i >= len(top) {
		return " |  | "
	}
	e := top[i]
	return fmt.Sprintf("`%s` | %.1f | %.1f", strings.ReplaceAll(e.Function, "|", `\|`), e.FlatPct, e.CumPct)
}

// floorLine is b's floors in one line.
func floorLine(b BackendProfile) string {
	if len(b.Floors) == 0 {
		if b.NoFloor != "" {
			return b.NoFloor + "."
		}
		return "not measured."
	}
	var parts []string
	for _, f := range b.Floors {
		if f.NotRun != "" {
			parts = append(parts, fmt.Sprintf("%s, %s: %s", f.Tool, f.What, f.NotRun))
			continue
		}
		parts = append(parts, fmt.Sprintf("%s, %s: **%.0f** %s", f.Tool, f.What, f.PerSec, f.Unit))
	}
	return strings.Join(parts, "; ") + "."
}
