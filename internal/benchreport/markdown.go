package benchreport

import (
	"fmt"
	"io"

	"github.com/dlockdev/dlock/internal/baseline"
)

// WriteMarkdown writes comparisons as one Markdown table per backend.
func WriteMarkdown(w io.Writer, cs []baseline.Comparison) error {
	for _, group := range byBackend(cs) {
		fmt.Fprintf(w, "#### %s\n\nBaseline: %s.\n\n", group[0].Backend, describe(group))
		fmt.Fprintln(w, "| workload | dlock ops/s | baseline ops/s | ratio | p50 ms (dlock / base) | p99 ms (dlock / base) "+
			"| handoff p50 ms | fairness | round trips/op | server µs/op | client µs/op |")
		fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
		for _, c := range group {
			d, b := c.Dlock, c.Baseline
			handoff, fair := "—", "—"
			if c.Contended {
				handoff = fmt.Sprintf("%.2f / %.2f", d.HandoffP50Ms, b.HandoffP50Ms)
				fair = fmt.Sprintf("%.2f / %.2f", d.Fairness, b.Fairness)
			}
			if _, err := fmt.Fprintf(w, "| %s | %.0f | %.0f | **%.2f×** | %.2f / %.2f | %.2f / %.2f | %s | %s | %s / %s | %s / %s | %s / %s |\n",
				c.Workload, d.PerSec, b.PerSec, c.Ratio, d.P50Ms, b.P50Ms, d.P99Ms, b.P99Ms, handoff, fair,
				opt(d.RoundTrips, "%.2f"), opt(b.RoundTrips, "%.2f"), opt(d.ServerUsec, "%.0f"), opt(b.ServerUsec, "%.0f"),
				opt(d.ClientUsec, "%.0f"), opt(b.ClientUsec, "%.0f")); err != nil {
				return err
			}
		}
		writeErrors(w, group)
		if hasWriteRef(group) {
			fmt.Fprintln(w)
			writeHandoffRefs(w, group, "- ")
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "p50/p99: one TryAcquire+Release cycle (uncontended) or the wait for the lock (contended). "+
		"Round trips are counted by a hook on each side's client (go-redis hook, pgx tracer, gRPC interceptors). "+
		"Server µs/op: "+orNA(serverTimeKinds(cs))+". Client µs/op: the benchmark process's CPU (user + system) per op, "+
		"the harness's own share included alike for both sides.")
	return nil
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
			fmt.Fprintf(w, "| %s | %d | failed: %s | | | | | | |\n", r.Backend, r.Leases, r.Error)
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
		if c.Dlock.Errors+c.Baseline.Errors == 0 {
			continue
		}
		fmt.Fprintf(w, "\nFailed operations in %s: dlock %d, baseline %d (first: %s).\n",
			c.Workload, c.Dlock.Errors, c.Baseline.Errors, firstError(c))
	}
}

func firstError(c baseline.Comparison) string {
	if c.Dlock.FirstError != "" {
		return c.Dlock.FirstError
	}
	return c.Baseline.FirstError
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
