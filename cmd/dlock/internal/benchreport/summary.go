package benchreport

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/dlockdev/dlock/cmd/dlock/internal/baseline"
)

// generatedNote opens every rendered Markdown block.
const generatedNote = "<!-- Rendered from docs/benchmarks.json by `make bench-readme`; TestBenchDocsCurrent checks it. Do not edit. -->\n"

// WriteSummary writes the benchmark summary at the top of
// docs/benchmarks.md: when and where the results were measured, per
// backend the headline ratios and round trips, every target met or not,
// the cost of holding many leases, and the HTTP API against the library.
func WriteSummary(w io.Writer, r *Results) error {
	fmt.Fprint(w, generatedNote)
	fmt.Fprintf(w, "Measured %s on %s (%s a side and workload, in %d alternating slices%s). Ratio: dlock's rate over the "+
		"hand-written baseline's, in the same run; contended, over the best of the baseline's ways of waiting; "+
		"every figure per workload is below.\n\n", r.Measured, shortMachine(r.Machine), seconds(r.SecondsPerSide), r.Rounds, runsNote(r))
	writeSummaryTable(w, r.Comparisons)
	if len(r.Figures) > 1 {
		fmt.Fprintf(w, "\nTargets (✓ met in most of the %d runs, that is in the median run; ✗ not):\n", len(r.Figures))
	} else {
		fmt.Fprintln(w, "\nTargets (✓ met, ✗ not met):")
	}
	fmt.Fprintln(w)
	for _, v := range r.Verdicts() {
		mark, got := "✗", v.Got
		if v.Met {
			mark = "✓"
		}
		if got == "" {
			got = "not measured"
		}
		fmt.Fprintf(w, "- %s %s: %s — %s\n", mark, v.Backend, v.What, got)
	}
	if len(r.Leases) > 0 {
		fmt.Fprintln(w)
		writeLeasesSentence(w, r.Leases)
	}
	if len(r.Serve) > 0 {
		fmt.Fprintln(w)
		return writeServeSummary(w, r)
	}
	return nil
}

// runsNote says, when every backend was compared several times, that
// each figure is the run with the median ratio.
func runsNote(r *Results) string {
	if len(r.Figures) < 2 {
		return ""
	}
	return fmt.Sprintf("; every backend compared %d times, one after another over all of them, and each workload's "+
		"figures here and below are those of its run with the median ratio", len(r.Figures))
}

// writeSummaryTable writes one row per backend.
func writeSummaryTable(w io.Writer, cs []baseline.Comparison) {
	fmt.Fprintln(w, "| backend | uncontended ratio, G = 1 / 16 / 64 | round trips a cycle, dlock / baseline | "+
		"contended ratio (16 waiters) | the baseline's best wait | critical sections/s, dlock / baseline | "+
		"wait p99 ms, dlock / baseline | round trips a critical section, dlock / baseline |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	for _, g := range byBackend(cs) {
		var un []string
		rt := "—"
		cont := "| — | — | — | — | — |"
		for _, c := range g {
			if !c.Contended {
				un = append(un, fmt.Sprintf("%.2f", c.Ratio))
				if c.Goroutines == 1 {
					rt = opt(c.Dlock.RoundTrips, "%.2f") + " / " + opt(c.Baseline.RoundTrips, "%.2f")
				}
				continue
			}
			cont = fmt.Sprintf("| **%.2f×** | %s | %.0f / %.0f | %.2f / %.2f | %s / %s |", c.Ratio, c.BaselineImpl,
				c.Dlock.PerSec, c.Baseline.PerSec, c.Dlock.P99Ms, c.Baseline.P99Ms, opt(c.Dlock.RoundTrips, "%.2f"), opt(c.Baseline.RoundTrips, "%.2f"))
		}
		fmt.Fprintf(w, "| %s | %s | %s %s\n", g[0].Backend, strings.Join(un, " / "), rt, cont)
	}
}

// writeLeasesSentence says what holding many leases cost, per backend.
func writeLeasesSentence(w io.Writer, rs []baseline.LeaseReport) {
	r0 := rs[0]
	var parts []string
	for _, r := range rs {
		switch {
		case r.Error != "":
			parts = append(parts, fmt.Sprintf("%s failed (%s)", r.Backend, r.Error))
		case r.RoundTrips == nil:
			parts = append(parts, fmt.Sprintf("%s %d refresh calls for %d refreshes, %d lost", r.Backend, r.RefreshCalls, r.Refreshes, r.Lost))
		default:
			parts = append(parts, fmt.Sprintf("%s %d refresh calls and %d round trips for %d refreshes, %d lost",
				r.Backend, r.RefreshCalls, *r.RoundTrips, r.Refreshes, r.Lost))
		}
	}
	fmt.Fprintf(w, "Holding %d leases on one Locker (`dlock bench --leases`, %s at a TTL of %s): %s.\n",
		r0.Leases, seconds(r0.HeldSeconds), seconds(r0.TTLSeconds), strings.Join(parts, "; "))
}

// writeServeSummary writes the HTTP API against the library, per backend.
func writeServeSummary(w io.Writer, r *Results) error {
	s0 := r.Serve[0]
	fmt.Fprintf(w, "What HTTP costs (`dlock bench --serve`: server, clients and library in one process, %d goroutines, %s a side; "+
		"the ratio is HTTP's over the library called directly):\n\n", s0.Goroutines, s0.Duration)
	fmt.Fprintf(w, "| backend | uncontended cycles/s, HTTP / library (ratio) | HTTP cycle p99 ms | contended critical sections/s, HTTP / library (ratio) | %d events streams: `lost` p50 / p99 ms |\n", s0.SSEStreams)
	fmt.Fprintln(w, "|---|---|---:|---|---|")
	for _, s := range r.Serve {
		u, c := s.Uncontended, s.Contended
		_, err := fmt.Fprintf(w, "| %s | %.0f / %.0f (%.2f×) | %.2f | %.0f / %.0f (%.2f×) | %s |\n", s.Backend,
			u.HTTP.PerSecond, u.Library.PerSecond, u.Ratio, msF(u.HTTP.P99), c.HTTP.PerSecond, c.Library.PerSecond, c.Ratio, lostCell(s.Streams.Lost))
		if err != nil {
			return err
		}
	}
	return nil
}

// seconds prints a number of seconds to three figures ("3 s", "0.5 s").
func seconds(s float64) string { return strconv.FormatFloat(s, 'g', 3, 64) + " s" }

// shortMachine is the machine's description up to its first ','.
func shortMachine(m string) string {
	short, _, _ := strings.Cut(m, ",")
	return short
}
