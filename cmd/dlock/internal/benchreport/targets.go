package benchreport

import (
	"fmt"
	"math"
	"strings"

	"github.com/dlockdev/dlock/cmd/dlock/internal/baseline"
)

// Goal is one performance target the benchmarks page states for a backend,
// checked against every regeneration's results: the summary says which
// are met and which are not, with the figures.
type Goal struct {
	// Backend is the Comparison.Backend the goal is about.
	Backend string
	// What states the target.
	What string
	// check reports whether the backend's rows (by workload) meet it and
	// the figures that decide; ok is false when they were not measured.
	check func(rows map[string]baseline.Comparison) (met bool, got string, ok bool)
}

// Goals are the targets of docs/benchmarks.md's summary.
var Goals = []Goal{
	{"postgres-advisory", "uncontended ≥ 0.8× at G = 1, 16 and 64", uncontendedAtLeast(0.8)},
	{"postgres-advisory", "contended ≥ 0.8×", contendedAtLeast(0.8, 0)},
	{"postgres-lease", "uncontended ≥ 0.9× at G = 1, 16 and 64", uncontendedAtLeast(0.9)},
	{"postgres-lease", "contended ≥ 1000 critical sections/s with a wait p99 ≤ 10 ms", contendedRate(1000, 10)},
	{"mysql-get_lock", "uncontended ≥ 0.8× at G = 1, 16 and 64", uncontendedAtLeast(0.8)},
	{"mysql-get_lock", "contended wait p99 ≤ 10 ms", contendedAtLeast(0, 10)},
	{"mysql-lease", "uncontended ≥ 0.8× at G = 1, 16 and 64", uncontendedAtLeast(0.8)},
	{"mysql-lease", "contended wait p99 ≤ 10 ms", contendedAtLeast(0, 10)},
	{"etcd", "uncontended ≥ 0.9× at G = 1, 16 and 64", uncontendedAtLeast(0.9)},
	{"etcd", "contended ≥ 2.5×", contendedAtLeast(2.5, 0)},
	{"redis", "uncontended ≥ 0.95× at G = 1, ≥ 1.1× at G = 16, ≥ 1.5× at G = 64", uncontendedEach(0.95, 1.1, 1.5)},
	{"redis", "contended ≥ 1× the best poll with a wait p99 ≤ 5 ms", contendedAtLeast(1, 5)},
}

// Verdict is a Goal checked against results.
type Verdict struct {
	Goal
	Met bool
	// Got is the figures that decide; "" when the backend was not measured.
	Got string
	// Runs is how many runs it was checked against when more than one
	// (Results.Verdicts), and Held in how many of them it held.
	Runs, Held int
}

// Check checks every goal against cs.
func Check(cs []baseline.Comparison) []Verdict {
	rows := map[string]map[string]baseline.Comparison{}
	for _, c := range cs {
		if rows[c.Backend] == nil {
			rows[c.Backend] = map[string]baseline.Comparison{}
		}
		rows[c.Backend][c.Workload] = c
	}
	var vs []Verdict
	for _, g := range Goals {
		met, got, ok := g.check(rows[g.Backend])
		if !ok {
			got = ""
		}
		vs = append(vs, Verdict{Goal: g, Met: ok && met, Got: got})
	}
	return vs
}

// round2 is v as printed with two decimals, so that a target is met or
// missed as the reader sees the figure.
func round2(v float64) float64 { return math.Round(v*100) / 100 }

// uncontendedAtLeast: the ratio at every G is at least min.
func uncontendedAtLeast(min float64) func(map[string]baseline.Comparison) (bool, string, bool) {
	return uncontendedEach(min, min, min)
}

// uncontendedEach: the ratio is at least at1 at G = 1, at16 at G = 16 and
// at64 at G = 64.
func uncontendedEach(at1, at16, at64 float64) func(map[string]baseline.Comparison) (bool, string, bool) {
	return func(rows map[string]baseline.Comparison) (bool, string, bool) {
		met := true
		var got []string
		for i, w := range []string{"uncontended-1", "uncontended-16", "uncontended-64"} {
			c, ok := rows[w]
			if !ok {
				return false, "", false
			}
			met = met && round2(c.Ratio) >= []float64{at1, at16, at64}[i]
			got = append(got, fmt.Sprintf("%.2f", c.Ratio))
		}
		return met, strings.Join(got, " / "), true
	}
}

// contendedAtLeast: the contended ratio is at least min and, when p99Ms
// is positive, dlock's wait p99 at most p99Ms.
func contendedAtLeast(min, p99Ms float64) func(map[string]baseline.Comparison) (bool, string, bool) {
	return func(rows map[string]baseline.Comparison) (bool, string, bool) {
		c, ok := rows["contended-16"]
		if !ok {
			return false, "", false
		}
		met := round2(c.Ratio) >= min
		got := fmt.Sprintf("%.2f× %s", c.Ratio, c.BaselineImpl)
		if p99Ms > 0 {
			met = met && round2(c.Dlock.P99Ms) <= p99Ms
			got += fmt.Sprintf(", wait p99 %.2f ms", c.Dlock.P99Ms)
		}
		return met, got, true
	}
}

// contendedRate: dlock grants at least rate critical sections a second
// with a wait p99 of at most p99Ms.
func contendedRate(rate, p99Ms float64) func(map[string]baseline.Comparison) (bool, string, bool) {
	return func(rows map[string]baseline.Comparison) (bool, string, bool) {
		c, ok := rows["contended-16"]
		if !ok {
			return false, "", false
		}
		met := math.Round(c.Dlock.PerSec) >= rate && round2(c.Dlock.P99Ms) <= p99Ms
		return met, fmt.Sprintf("%.0f critical sections/s, wait p99 %.2f ms", c.Dlock.PerSec, c.Dlock.P99Ms), true
	}
}
