package benchreport

import (
	"fmt"
	"io"
)

// WriteElectionsMarkdown writes `dlock bench --election` results.
func WriteElectionsMarkdown(w io.Writer, es []Election) error {
	fmt.Fprintln(w, "| backend | TTL s | rounds | min s | p50 s | max s | p50/TTL | past expiry p50 ms |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|")
	for _, e := range es {
		past := "n/a (no TTL)"
		if e.PastExpiryP50Ms != nil {
			past = fmt.Sprintf("%.0f", *e.PastExpiryP50Ms)
		}
		if _, err := fmt.Fprintf(w, "| %s | %g | %d | %.3f | %.3f | %.3f | %.2f | %s |\n", e.Backend, e.TTLSeconds, e.Rounds,
			e.MinMs/1000, e.P50Ms/1000, e.MaxMs/1000, e.P50OverTTL, past); err != nil {
			return err
		}
	}
	return nil
}

// WriteSemaphoresMarkdown writes `dlock bench --semaphore` results.
func WriteSemaphoresMarkdown(w io.Writer, ss []Semaphore) error {
	fmt.Fprintln(w, "| backend | permits | goroutines | hold ms | permits granted/s | wait p50 ms | wait p99 ms | max holders | errors | violations |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, s := range ss {
		if _, err := fmt.Fprintf(w, "| %s | %d | %d | %g | %.0f | %.2f | %.2f | %d | %d | %d |\n", s.Backend, s.Permits, s.Goroutines,
			s.HoldMs, s.OpsPerSec, s.WaitP50Ms, s.WaitP99Ms, s.MaxHolders, s.Errors, s.Violations); err != nil {
			return err
		}
	}
	return nil
}
