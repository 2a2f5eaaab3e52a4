package benchreport

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/dlockdev/dlock/cmd/dlock/internal/baseline"
)

// DefaultRuns is how many times `make bench-readme` compares every
// backend: a target counts as met when it holds in the median run, that
// is in most of them, so that one slow minute on a shared machine neither
// meets nor misses a target alone.
const DefaultRuns = 3

// Figure is what decides the targets in one run of one workload: the
// ratio, and dlock's rate and wait p99 (contended).
type Figure struct {
	Backend      string  `json:"backend"`
	Workload     string  `json:"workload"`
	Ratio        float64 `json:"ratio"`
	PerSec       float64 `json:"per_sec"`
	P99Ms        float64 `json:"p99_ms"`
	BaselineImpl string  `json:"baseline_impl,omitempty"`
}

// Medians takes the comparisons of several runs over the same backends
// and workloads, and returns, for each backend and workload (in the
// first run's order), the comparison of the run whose ratio is the median
// (the lower middle one of an even count), and every run's figures.
func Medians(runs [][]baseline.Comparison) ([]baseline.Comparison, [][]Figure) {
	if len(runs) == 0 {
		return nil, nil
	}
	key := func(c baseline.Comparison) string { return c.Backend + "\x00" + c.Workload }
	all := map[string][]baseline.Comparison{}
	figures := make([][]Figure, len(runs))
	for i, run := range runs {
		for _, c := range run {
			all[key(c)] = append(all[key(c)], c)
			figures[i] = append(figures[i], Figure{Backend: c.Backend, Workload: c.Workload, Ratio: c.Ratio,
				PerSec: c.Dlock.PerSec, P99Ms: c.Dlock.P99Ms, BaselineImpl: c.BaselineImpl})
		}
	}
	var med []baseline.Comparison
	for _, c := range runs[0] {
		cs := all[key(c)]
		slices.SortStableFunc(cs, func(a, b baseline.Comparison) int { return cmp.Compare(a.Ratio, b.Ratio) })
		med = append(med, cs[(len(cs)-1)/2])
	}
	return med, figures
}

// comparisons turns a run's figures back into the comparisons that Check
// reads.
func comparisons(fs []Figure) []baseline.Comparison {
	cs := make([]baseline.Comparison, len(fs))
	for i, f := range fs {
		cs[i] = baseline.Comparison{Backend: f.Backend, Workload: f.Workload, Ratio: f.Ratio, BaselineImpl: f.BaselineImpl,
			Dlock: baseline.Measure{PerSec: f.PerSec, P99Ms: f.P99Ms}}
	}
	return cs
}

// Verdicts checks every goal against r: against each run's figures when
// r has several runs (a goal is met when it held in most of them, and
// Got lists each run's figures), else against its comparisons.
func (r *Results) Verdicts() []Verdict {
	if len(r.Figures) < 2 {
		return Check(r.Comparisons)
	}
	per := make([][]Verdict, len(r.Figures))
	for i, fs := range r.Figures {
		per[i] = Check(comparisons(fs))
	}
	vs := make([]Verdict, len(Goals))
	for g := range Goals {
		v := Verdict{Goal: Goals[g], Runs: len(per)}
		var got []string
		for _, run := range per {
			if run[g].Met {
				v.Held++
			}
			if run[g].Got != "" {
				got = append(got, run[g].Got)
			}
		}
		v.Met = 2*v.Held > v.Runs
		if len(got) > 0 {
			v.Got = fmt.Sprintf("held in %d of %d runs: %s", v.Held, v.Runs, strings.Join(got, "; "))
		}
		vs[g] = v
	}
	return vs
}
