package benchreport

import (
	"fmt"
	"io"
	"strings"

	"github.com/dlockdev/dlock/cmd/dlock/internal/baseline"
)

// WriteMarkdown writes comparisons as one Markdown table per backend,
// each contended row followed by every way the baseline waited, then a
// legend of the columns.
func WriteMarkdown(w io.Writer, cs []baseline.Comparison) error {
	for _, group := range byBackend(cs) {
		fmt.Fprintf(w, "#### %s\n\nBaseline: %s.\n\n", group[0].Backend, describe(group))
		fmt.Fprintln(w, "| workload | dlock ops/s | baseline ops/s | ratio | p50 ms (dlock / base) | p99 ms (dlock / base) "+
			"| handoff p50 ms | fairness | round trips/op | server µs/op | client µs/op |")
		fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
		for _, c := range group {
			writeMarkdownRow(w, c)
		}
		writeErrors(w, group)
		for _, c := range group {
			writeCandidates(w, c)
		}
		if hasWriteRef(group) {
			fmt.Fprintln(w)
			writeHandoffRefs(w, group, "- ")
		}
		fmt.Fprintln(w)
	}
	_, err := fmt.Fprintln(w, "p50/p99: one TryAcquire+Release cycle (uncontended) or the wait for the lock (contended). "+
		"Handoff: from a holder's release to the next grant. Fairness: the fewest critical sections of a worker over the most. "+
		"Round trips are counted by a hook on each side's client (go-redis hook, pgx tracer, gRPC interceptors, the requests written "+
		"on a ZooKeeper connection, the replies read after a write on a MySQL connection). Server µs/op: "+orNA(serverTimeKinds(cs))+". Client µs/op: the benchmark process's CPU "+
		"(user + system) per op, the harness's own share included alike for both sides. A contended ratio is against the "+
		"baseline's best way of waiting; a busy poll is shown for reference only.")
	return err
}

// writeMarkdownRow writes one workload's row of a backend's table.
func writeMarkdownRow(w io.Writer, c baseline.Comparison) {
	d, b := c.Dlock, c.Baseline
	handoff, fair := "—", "—"
	if c.Contended {
		handoff = fmt.Sprintf("%.2f / %.2f", d.HandoffP50Ms, b.HandoffP50Ms)
		fair = fmt.Sprintf("%.2f / %.2f", d.Fairness, b.Fairness)
	}
	fmt.Fprintf(w, "| %s | %.0f | %.0f | **%.2f×** | %.2f / %.2f | %.2f / %.2f | %s | %s | %s / %s | %s / %s | %s / %s |\n",
		c.Workload, d.PerSec, b.PerSec, c.Ratio, d.P50Ms, b.P50Ms, d.P99Ms, b.P99Ms, handoff, fair,
		opt(d.RoundTrips, "%.2f"), opt(b.RoundTrips, "%.2f"), opt(d.ServerUsec, "%.0f"), opt(b.ServerUsec, "%.0f"),
		opt(d.ClientUsec, "%.0f"), opt(b.ClientUsec, "%.0f"))
}

// writeCandidates lists every way the baseline waited in a contended
// comparison, the best in bold.
func writeCandidates(w io.Writer, c baseline.Comparison) {
	if len(c.Candidates) == 0 {
		return
	}
	also, by := "", "baseline waits by"
	if len(c.DlockAlso) > 0 {
		also, by = ", and dlock's workers sharing one Locker", "waits by"
	}
	fmt.Fprintf(w, "\n%s, every way the baseline waited (**bold**: the best, which the ratio is against)%s:\n\n", c.Workload, also)
	fmt.Fprintln(w, "| "+by+" | critical sections/s | dlock ÷ it | wait p50 / p99 ms | handoff p50 ms | fairness | round trips/CS | server µs/CS | errors | violations |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, also := range c.DlockAlso {
		// Its ratio is to the baseline's best, as dlock's own.
		m := also.Measure
		fmt.Fprintf(w, "| %s (÷ the baseline's best) | %.0f | %s | %.2f / %.2f | %.2f | %.2f | %s | %s | %d | %d |\n", also.Name, m.PerSec, ratioTo(m, c.Baseline),
			m.P50Ms, m.P99Ms, m.HandoffP50Ms, m.Fairness, opt(m.RoundTrips, "%.2f"), opt(m.ServerUsec, "%.0f"), m.Errors, m.Violations)
	}
	for _, cand := range c.Candidates {
		m, name := cand.Measure, cand.Name
		switch {
		case cand.Best:
			name = "**" + name + "**"
		case cand.Extra:
			name += " (reference only)"
		}
		fmt.Fprintf(w, "| %s | %.0f | %s | %.2f / %.2f | %.2f | %.2f | %s | %s | %d | %d |\n", name, m.PerSec, ratioTo(c.Dlock, m),
			m.P50Ms, m.P99Ms, m.HandoffP50Ms, m.Fairness, opt(m.RoundTrips, "%.2f"), opt(m.ServerUsec, "%.0f"), m.Errors, m.Violations)
	}
}

func orNA(s string) string {
	if s == "" {
		return "n/a"
	}
	return s
}

// WriteLeasesMarkdown writes lease-holding reports as a Markdown table.
func WriteLeasesMarkdown(w io.Writer, rs []baseline.LeaseReport) error {
	fmt.Fprintln(w, "| backend | leases | held s | refreshes sent | refresh calls | leases/call | round trips | round trips/call | lost |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range rs {
		if r.Error != "" {
			fmt.Fprintf(w, "| %s | %d | failed: %s | | | | | | |\n", r.Backend, r.Leases, strings.ReplaceAll(r.Error, "|", `\|`))
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
		if _, err := fmt.Fprintf(w, "| %s | %d | %.1f | %d | %d | %.0f | %s | %s | %d |\n", r.Backend, r.Leases, r.HeldSeconds,
			r.Refreshes, r.RefreshCalls, perCall, rt, opt(r.RoundTripsPerCall, "%.2f"), r.Lost); err != nil {
			return err
		}
	}
	return nil
}

// writeErrors lists the failed operations of a backend's rows, if any.
func writeErrors(w io.Writer, group []baseline.Comparison) {
	for _, c := range group {
		n := c.Baseline.Errors
		first := c.Baseline.FirstError
		for _, cand := range c.Candidates {
			if !cand.Best {
				n += cand.Measure.Errors
				first = cmpStr(first, cand.Measure.FirstError)
			}
		}
		if c.Dlock.Errors+n == 0 {
			continue
		}
		fmt.Fprintf(w, "\nFailed operations in %s: dlock %d, baseline %d (first: %s).\n",
			c.Workload, c.Dlock.Errors, n, cmpStr(c.Dlock.FirstError, first))
	}
}

// cmpStr is the first non-empty of a and b.
func cmpStr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// hasWriteRef reports whether a comparison of group measured the
// backend's own write.
func hasWriteRef(group []baseline.Comparison) bool {
	for _, c := range group {
		if c.WriteP50Ms > 0 {
			return true
		}
	}
	return false
}
