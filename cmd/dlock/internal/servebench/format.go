package servebench

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Format prints r as readable tables.
func (r Report) Format(w io.Writer) {
	per := r.Duration.String()
	if r.Ops > 0 {
		per = fmt.Sprintf("%d operations", r.Ops)
	}
	fmt.Fprintf(w, "dlock serve vs library on %s: %d goroutines, %s per workload and side\n\n", r.Backend, r.Goroutines, per)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workload\tside\tops\tops/s\tp50\tp99\thandoff p50\thandoff p99\tfailed\tcpu/op\t")
	r.Uncontended.rows(tw, fmt.Sprintf("uncontended-%d", r.Goroutines), "cycle")
	r.Contended.rows(tw, fmt.Sprintf("contended-%d", r.Goroutines), "wait")
	_ = tw.Flush()
	fmt.Fprintf(w, "\nuncontended: HTTP does %.3f× the library's cycles/s; server overhead %s per cycle (p50 difference)\n",
		r.Uncontended.Ratio, micros(r.Uncontended.Overhead))
	fmt.Fprintf(w, "contended:   HTTP does %.3f× the library's critical sections/s; overhead %s per critical section\n",
		r.Contended.Ratio, micros(r.Contended.Overhead))
	if r.Streams.Streams > 0 {
		r.Streams.format(w)
	}
}

// rows prints the two sides of c; what names the latency measured.
func (c Compare) rows(tw io.Writer, name, what string) {
	for _, s := range []struct {
		side string
		w    Workload
	}{{"http", c.HTTP}, {"library", c.Library}} {
		hp50, hp99 := "-", "-"
		if s.w.HandoffP50 > 0 || s.w.HandoffP99 > 0 {
			hp50, hp99 = short(s.w.HandoffP50), short(s.w.HandoffP99)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.0f\t%s %s\t%s\t%s\t%s\t%d\t%s\t\n", name, s.side, s.w.Ops, s.w.PerSecond,
			what, short(s.w.P50), short(s.w.P99), hp50, hp99, s.w.Failed, micros(s.w.CPUPerOp))
	}
}

// format prints the stream phase.
func (s Streams) format(w io.Writer) {
	fmt.Fprintf(w, "\nevents streams: %d leases (acquired in %s), each with its stream open (opened in %s)\n",
		s.Streams, short(s.Acquire), short(s.Open))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "ended by\tevent\tstreams\tdelivered\tended\tp50\tp99\tmax\t")
	for _, d := range []struct {
		how string
		d   Delivery
	}{{"release", s.Released}, {"force-release", s.Lost}} {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\t\n", d.how, d.d.Event, d.d.Streams, d.d.Delivered,
			d.d.Ended, short(d.d.P50), short(d.d.P99), short(d.d.Max))
	}
	_ = tw.Flush()
	if len(s.Lost.Reasons) > 0 {
		fmt.Fprintf(w, "lost events by reason: %s\n", reasons(s.Lost.Reasons))
	}
	fmt.Fprintf(w, "every event delivered %s after the first release request\n", short(s.All))
	b, a := s.Before, s.WithAll
	n := max(s.Streams, 1)
	fmt.Fprintf(w, "process with the leases held:  %d goroutines (server %d, client %d), heap in use %s\n",
		b.Goroutines, b.Server, b.Client, mib(b.HeapInuse))
	fmt.Fprintf(w, "process with every stream open: %d goroutines (server %d, client %d), heap in use %s\n",
		a.Goroutines, a.Server, a.Client, mib(a.HeapInuse))
	fmt.Fprintf(w, "per stream: %.2f server goroutines, %.2f client goroutines, %.1f KiB heap (server and client)\n",
		float64(a.Server-b.Server)/float64(n), float64(a.Client-b.Client)/float64(n),
		(float64(a.HeapInuse)-float64(b.HeapInuse))/1024/float64(n))
}

// reasons prints counts by reason, most first.
func reasons(m map[string]int) string {
	keys := slices.SortedFunc(maps.Keys(m), func(a, b string) int { return cmp.Or(m[b]-m[a], strings.Compare(a, b)) })
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%q %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// short prints d rounded to 3 significant figures or so.
func short(d time.Duration) string {
	switch {
	case d >= 10*time.Second:
		return d.Round(100 * time.Millisecond).String()
	case d >= 10*time.Millisecond:
		return d.Round(100 * time.Microsecond).String()
	case d >= 10*time.Microsecond:
		return d.Round(time.Microsecond).String()
	}
	return d.String()
}

// micros prints d in µs.
func micros(d time.Duration) string {
	return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond))
}

// mib prints b in MiB.
func mib(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
