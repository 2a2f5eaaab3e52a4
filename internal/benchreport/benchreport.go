// Package benchreport renders the results of `dlock bench --compare` and
// `dlock bench --leases`: a table for people, Markdown for the docs, and
// an SVG bar chart of dlock against the hand-written baseline. The
// regeneration of docs/benchmarks.md and docs/benchmarks.svg lives in
// this package's tests (see regenerate_test.go).
package benchreport

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/dlockdev/dlock/internal/baseline"
)

// WriteTable writes comparisons as aligned text: per backend a heading
// naming the baseline, then two rows per workload (dlock, baseline).
func WriteTable(w io.Writer, cs []baseline.Comparison) error {
	for i, group := range byBackend(cs) {
		if i > 0 {
			fmt.Fprintln(w)
		}
		c0 := group[0]
		fmt.Fprintf(w, "%s: dlock against %s\n", c0.Backend, describe(group))
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "WORKLOAD\tSIDE\tOPS/S\tRATIO\tP50 MS\tP99 MS\tHANDOFF P50 MS\tFAIRNESS\tRT/OP\tSERVER µS/OP\tCLIENT µS/OP\tERRORS\tVIOLATIONS\t")
		for _, c := range group {
			row(tw, c.Workload, "dlock", fmt.Sprintf("%.2f", c.Ratio), c.Contended, c.Dlock)
			row(tw, "", "baseline", "", c.Contended, c.Baseline)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		writeHandoffRefs(w, group, "")
	}
	fmt.Fprintln(w, "\nP50/P99: one acquire+release cycle (uncontended) or the wait for the lock (contended).")
	fmt.Fprintln(w, "RT/OP: client round trips per cycle, counted by a hook on each side's client.")
	if st := serverTimeKinds(cs); st != "" {
		fmt.Fprintf(w, "SERVER µS/OP: %s.\n", st)
	}
	fmt.Fprintln(w, "CLIENT µS/OP: this process's CPU (user + system), the harness's share included.")
	return nil
}

func row(tw io.Writer, workload, side, ratio string, contended bool, m baseline.Measure) {
	handoff, fair := "-", "-"
	if contended {
		handoff, fair = fmt.Sprintf("%.2f", m.HandoffP50Ms), fmt.Sprintf("%.2f", m.Fairness)
	}
	fmt.Fprintf(tw, "%s\t%s\t%.0f\t%s\t%.2f\t%.2f\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t\n", workload, side, m.PerSec, ratio,
		m.P50Ms, m.P99Ms, handoff, fair, opt(m.RoundTrips, "%.2f"), opt(m.ServerUsec, "%.1f"), opt(m.ClientUsec, "%.0f"), m.Errors, m.Violations)
}

// opt formats v, or "n/a" when it is unknown.
func opt(v *float64, format string) string {
	if v == nil {
		return "n/a"
	}
	return fmt.Sprintf(format, *v)
}

// byBackend groups cs by backend, keeping their order.
func byBackend(cs []baseline.Comparison) [][]baseline.Comparison {
	var out [][]baseline.Comparison
	for _, c := range cs {
		if n := len(out); n > 0 && out[n-1][0].Backend == c.Backend {
			out[n-1] = append(out[n-1], c)
		} else {
			out = append(out, []baseline.Comparison{c})
		}
	}
	return out
}

// describe names a backend's baselines, uncontended then contended.
func describe(group []baseline.Comparison) string {
	var un, co string
	for _, c := range group {
		if c.Contended {
			co = c.BaselineImpl
		} else {
			un = c.BaselineImpl
		}
	}
	switch {
	case un == "":
		return co
	case co == "":
		return un
	}
	return un + "; contended: " + co
}

// serverTimeKinds lists what server time means for each backend.
func serverTimeKinds(cs []baseline.Comparison) string {
	var parts []string
	for _, g := range byBackend(cs) {
		if k := g[0].ServerTime; k != "" {
			parts = append(parts, g[0].Backend+" "+k)
		}
	}
	return strings.Join(parts, "; ")
}

// WriteLeases writes lease-holding reports as aligned text.
func WriteLeases(w io.Writer, rs []baseline.LeaseReport) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "BACKEND\tLEASES\tTTL S\tHELD S\tREFRESHES\tREFRESH CALLS\tLEASES/CALL\tROUND TRIPS\tRT/CALL\tLOST\t")
	for _, r := range rs {
		if r.Error != "" {
			fmt.Fprintf(tw, "%s\t%d\tfailed: %s\t\n", r.Backend, r.Leases, r.Error)
			continue
		}
		perCall := 0.0
		if r.RefreshCalls > 0 {
			perCall = float64(r.Refreshes) / float64(r.RefreshCalls)
		}
		rt := "n/a"
		if r.RoundTrips != nil {
			rt = fmt.Sprint(*r.RoundTrips)
		}
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%d\t%d\t%.0f\t%s\t%s\t%d\t\n", r.Backend, r.Leases, r.TTLSeconds, r.HeldSeconds,
			r.Refreshes, r.RefreshCalls, perCall, rt, opt(r.RoundTripsPerCall, "%.2f"), r.Lost)
	}
	return tw.Flush()
}

// writeHandoffRefs writes, for each contended comparison of group that
// measured the backend's own write (Comparison.WriteP50Ms), each side's
// handoff p50 as a multiple of that write's p50: a handoff cannot beat
// the write that frees the lock. Each line starts with lead.
func writeHandoffRefs(w io.Writer, group []baseline.Comparison, lead string) {
	for _, c := range group {
		if c.WriteP50Ms > 0 {
			fmt.Fprintf(w, "%s%s: %s p50 %.2f ms in this run; handoff p50 %.2f× that for dlock, %.2f× for the baseline\n",
				lead, c.Workload, c.Write, c.WriteP50Ms, c.Dlock.HandoffP50Ms/c.WriteP50Ms, c.Baseline.HandoffP50Ms/c.WriteP50Ms)
		}
	}
}
