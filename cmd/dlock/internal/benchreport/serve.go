package benchreport

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/dlockdev/dlock/cmd/dlock/internal/servebench"
)

// WriteServeMarkdown writes `dlock bench --serve` reports: per backend
// both workloads over HTTP and on the library, then the events streams.
func WriteServeMarkdown(w io.Writer, rs []servebench.Report) error {
	fmt.Fprintln(w, "| backend | workload | HTTP ops/s | library ops/s | ratio | HTTP p50 / p99 ms | library p50 / p99 ms | overhead µs/op | failed | violations |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range rs {
		for _, x := range []struct {
			name string
			c    servebench.Compare
		}{{fmt.Sprintf("uncontended-%d", r.Goroutines), r.Uncontended}, {fmt.Sprintf("contended-%d", r.Goroutines), r.Contended}} {
			h, l := x.c.HTTP, x.c.Library
			fmt.Fprintf(w, "| %s | %s | %.0f | %.0f | %.2f× | %.2f / %.2f | %.2f / %.2f | %.0f | %d | %d |\n", r.Backend, x.name,
				h.PerSecond, l.PerSecond, x.c.Ratio, msF(h.P50), msF(h.P99), msF(l.P50), msF(l.P99),
				float64(x.c.Overhead)/float64(time.Microsecond), h.Failed+l.Failed, h.Violations+l.Violations)
		}
	}
	fmt.Fprintln(w, "\nP50/P99: one cycle (uncontended) or the wait for the lock (contended). Overhead: how much longer a cycle "+
		"takes over HTTP (uncontended: the p50s' difference; contended: of the time per critical section).")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| backend | streams | `released` p50 / p99 / max ms | `lost` p50 / p99 / max ms | `lost` reasons | delivered | server goroutines a stream | heap KiB a stream |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---|---:|---:|---:|")
	for _, r := range rs {
		s := r.Streams
		if s.Streams == 0 {
			continue
		}
		n := float64(s.Streams)
		_, err := fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %d / %d | %.2f | %.1f |\n", r.Backend, s.Streams,
			delivery(s.Released), delivery(s.Lost), lostHow(s.Lost), s.Released.Delivered+s.Lost.Delivered, s.Streams,
			float64(s.WithAll.Server-s.Before.Server)/n, (float64(s.WithAll.HeapInuse)-float64(s.Before.HeapInuse))/1024/n)
		if err != nil {
			return err
		}
	}
	return nil
}

// delivery prints an event's p50 / p99 / max in ms.
func delivery(d servebench.Delivery) string {
	return fmt.Sprintf("%.1f / %.1f / %.1f", msF(d.P50), msF(d.P99), msF(d.Max))
}

// lostHow lists the reasons the lost events gave, most first.
func lostHow(d servebench.Delivery) string {
	keys := slices.SortedFunc(maps.Keys(d.Reasons), func(a, b string) int {
		return cmp.Or(d.Reasons[b]-d.Reasons[a], strings.Compare(a, b))
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s: %d", k, d.Reasons[k])
	}
	return cmpStr(strings.Join(parts, ", "), "—")
}

// lostCell is the summary's cell for force-release events.
func lostCell(d servebench.Delivery) string {
	return fmt.Sprintf("%.1f / %.1f (%s)", msF(d.P50), msF(d.P99), lostHow(d))
}

// msF is d in milliseconds.
func msF(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
