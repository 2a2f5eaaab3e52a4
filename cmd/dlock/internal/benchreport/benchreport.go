// Package benchreport renders the results of `dlock bench`: a table for
// people, Markdown for the docs, an SVG bar chart of dlock against the
// hand-written baseline, and the summary (docs/benchmarks.md) with the targets met
// and missed. Every published figure is rendered from one committed
// results file (Results, docs/benchmarks.json) into named blocks of the
// docs (Blocks, package docblock); the measuring run lives in this
// package's tests (regenerate_test.go, make bench-readme) and a test
// checks every block against the file (docs_test.go).
package benchreport

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/dlockdev/dlock/cmd/dlock/internal/baseline"
)

// tableColumns are WriteTable's columns and what the legend says of each.
var tableColumns = []struct{ name, legend string }{
	{"WORKLOAD", "uncontended-G, G goroutines on one Locker (the baseline: one client), each on its own name, one attempt then a release; " +
		"contended-16, 16 workers each with its own Locker (session, connection) on one name: wait for the lock without a bound (the run's end cancels the waits, as a shutdown would), release, pause 1 ms."},
	{"SIDE", "dlock, or the hand-written baseline; contended, dlock's workers each with a Locker of their own, then (ref.) sharing one, " +
		"and each way the baseline waits: * marks the best (the most critical " +
		"sections per second), which RATIO is against; (ref.) marks a way shown for reference only, never the best (a busy poll " +
		"spends a core per waiter)."},
	{"OPS/S", "cycles (uncontended) or critical sections (contended) per second."},
	{"RATIO", "dlock's OPS/S over the baseline's (on a baseline row, over that row's): above 1, dlock did more."},
	{"P50 MS", "the median of one acquire+release cycle (uncontended) or of the wait for the lock (contended)."},
	{"P99 MS", "the 99th percentile of the same."},
	{"HANDOFF P50 MS", "contended: the median time from a holder's release to the next grant."},
	{"FAIRNESS", "contended: the fewest critical sections of a worker over the most (1: even; 0: a worker got none)."},
	{"RT/OP", "client round trips per cycle or critical section, counted by a hook on each side's client (go-redis hook, " +
		"pgx tracer, gRPC interceptors, ZooKeeper requests written, MySQL replies read after a write); n/a: an embedded backend."},
	{"SERVER µS/OP", "the server's time per op, where the backend exposes it"},
	{"CLIENT µS/OP", "this process's CPU (user + system) per op, the harness's share included alike for both sides."},
	{"ERRORS", "failed acquires and releases (a wait ended by the run's end is none)."},
	{"VIOLATIONS", "grants made while another worker held the lock: mutual exclusion broken; must be 0."},
}

// WriteTable writes comparisons as aligned text: per backend a heading
// naming the baseline, then per workload a row for dlock and one for the
// baseline (contended: one for each of the baseline's ways of waiting,
// the best marked), and a legend of every column.
func WriteTable(w io.Writer, cs []baseline.Comparison) error {
	var head strings.Builder
	for _, c := range tableColumns {
		head.WriteString(c.name + "\t")
	}
	for i, group := range byBackend(cs) {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "%s: dlock against %s\n", group[0].Backend, describe(group))
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, head.String())
		for _, c := range group {
			row(tw, c.Workload, "dlock", fmt.Sprintf("%.2f", c.Ratio), c.Contended, c.Dlock)
			for _, also := range c.DlockAlso {
				row(tw, "", candidateSide(also), ratioTo(also.Measure, c.Baseline), true, also.Measure)
			}
			if len(c.Candidates) == 0 {
				row(tw, "", "baseline", "", c.Contended, c.Baseline)
			}
			for _, cand := range c.Candidates {
				row(tw, "", candidateSide(cand), ratioTo(c.Dlock, cand.Measure), true, cand.Measure)
			}
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		writeHandoffRefs(w, group, "")
	}
	fmt.Fprintln(w)
	return writeLegend(w, cs)
}

// candidateSide names a baseline's way of waiting in the SIDE column.
func candidateSide(c baseline.Candidate) string {
	switch {
	case c.Best:
		return "* " + c.Name
	case c.Extra:
		return c.Name + " (ref.)"
	}
	return c.Name
}

// ratioTo is dlock's rate over m's, formatted.
func ratioTo(dlock, m baseline.Measure) string {
	if m.PerSec <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", dlock.PerSec/m.PerSec)
}

// writeLegend explains every column of WriteTable.
func writeLegend(w io.Writer, cs []baseline.Comparison) error {
	for _, c := range tableColumns {
		text := c.legend
		if c.name == "SERVER µS/OP" {
			text += ": " + orNA(serverTimeKinds(cs)) + "."
		}
		if _, err := fmt.Fprintf(w, "%s: %s\n", c.name, text); err != nil {
			return err
		}
	}
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

// describe names a backend's baseline: its uncontended cycle, and, when
// contended, its ways of waiting.
func describe(group []baseline.Comparison) string {
	var un string
	var waits []string
	for _, c := range group {
		switch {
		case !c.Contended:
			un = c.BaselineImpl
		case len(c.Candidates) == 0:
			waits = append(waits, c.BaselineImpl)
		default:
			for _, cand := range c.Candidates {
				waits = append(waits, cand.Name)
			}
		}
	}
	switch {
	case un == "":
		return "contended: " + strings.Join(waits, ", ")
	case len(waits) == 0:
		return un
	}
	return un + "; contended: " + strings.Join(waits, ", ")
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
	fmt.Fprintln(tw, "BACKEND\tLEASES\tTTL S\tHELD S\tREFRESHES\tREFRESH CALLS\tLEASES/CALL\tROUND TRIPS\tRT/CALL\tRT/TICK\tHEAP B/LEASE\tLOST\t")
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
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%d\t%d\t%.0f\t%s\t%s\t%s\t%.0f\t%d\t\n", r.Backend, r.Leases, r.TTLSeconds, r.HeldSeconds,
			r.Refreshes, r.RefreshCalls, perCall, rt, opt(r.RoundTripsPerCall, "%.2f"), opt(r.RoundTripsPerTick, "%.1f"),
			r.HeapBytesPerLease, r.Lost)
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
