package benchreport

import (
	"bytes"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/dlockdev/dlock/cmd/dlock/internal/baseline"
	"github.com/dlockdev/dlock/internal/docblock"
)

// Files of the growth run, relative to the repository's root: the
// committed results and the chart rendered from them (its table is the
// block GrowthBlock of DocFile).
const (
	GrowthResultsFile = "docs/growth.json"
	GrowthChartFile   = "docs/growth.svg"
)

// GrowthBlock names the block of DocFile rendered from GrowthResultsFile.
const GrowthBlock = "bench-growth"

// GrowthLeases are the numbers of leases the growth run holds on one
// Locker, per backend.
var GrowthLeases = []int{1_000, 10_000, 100_000}

// Targets of the growth run, per backend: a lease's client memory and,
// at any N, no lease lost.
const (
	MaxHeapPerLease = 2048 // bytes
	MaxLost         = 0
)

// Growth is what `make bench-growth` measured, kept in the committed file
// docs/growth.json: the growth table of docs/benchmarks.md and
// docs/growth.svg are rendered from it (GrowthBlocks).
type Growth struct {
	// Measured is the UTC day of the run; Machine where it ran.
	Measured string `json:"measured"`
	Machine  string `json:"machine"`
	// Rows are one lease-holding run per backend and number of leases
	// (GrowthLeases), in the order of the table; a row whose run failed
	// carries its Error.
	Rows []baseline.LeaseReport `json:"rows"`
}

// ReadGrowth reads a growth results file.
func ReadGrowth(path string) (*Growth, error) { return readJSON[Growth](path) }

// WriteGrowth writes g to path, indented, for review in a diff.
func WriteGrowth(path string, g *Growth) error { return writeJSON(path, g) }

// growthNote opens the rendered growth block.
const growthNote = "<!-- Rendered from docs/growth.json by `make bench-growth`; TestBenchDocsCurrent checks it. Do not edit. -->\n"

// GrowthBlocks are the blocks rendered from g in the repository at root:
// the growth table of docs/benchmarks.md and docs/growth.svg.
func GrowthBlocks(root string, g *Growth) []docblock.Block {
	return []docblock.Block{
		{File: filepath.Join(root, DocFile), Name: GrowthBlock, Render: func() (string, error) {
			var b bytes.Buffer
			b.WriteString(growthNote)
			err := WriteGrowthMarkdown(&b, g)
			return b.String(), err
		}},
		{File: filepath.Join(root, GrowthChartFile), Render: func() (string, error) {
			var b bytes.Buffer
			err := WriteGrowthSVG(&b, g)
			return b.String(), err
		}},
	}
}

// MeetsTarget reports whether r held every lease, lost none and kept the
// client's heap per lease within MaxHeapPerLease.
func MeetsTarget(r baseline.LeaseReport) bool {
	return r.Error == "" && r.Lost <= MaxLost && r.HeapBytesPerLease <= MaxHeapPerLease
}

// growthGroups are g's rows by backend, in order of first appearance.
func growthGroups(g *Growth) [][]baseline.LeaseReport {
	var out [][]baseline.LeaseReport
	at := map[string]int{}
	for _, r := range g.Rows {
		i, ok := at[r.Backend]
		if !ok {
			i = len(out)
			at[r.Backend] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], r)
	}
	return out
}

// WriteGrowthMarkdown writes g as a Markdown table, a row per backend
// and number of leases with ✓ or ✗ against the targets, then one line
// per backend: its verdict at the most leases held, and any smaller run
// that missed.
func WriteGrowthMarkdown(w io.Writer, g *Growth) error {
	fmt.Fprintf(w, "Measured %s on %s.\n\n", g.Measured, g.Machine)
	fmt.Fprintln(w, "| backend | leases | acquire all, s | held s | refresh round trips/tick | client memory/lease | lost | release all, s | ≤ 2 KiB, 0 lost |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|:---:|")
	for _, r := range g.Rows {
		if r.Error != "" {
			fmt.Fprintf(w, "| %s | %d | failed: %s | | | | | | ✗ |\n", r.Backend, r.Leases, strings.ReplaceAll(r.Error, "|", `\|`))
			continue
		}
		fmt.Fprintf(w, "| %s | %d | %.2f | %.1f | %s | %s | %d | %s | %s |\n", r.Backend, r.Leases, r.AcquireSeconds, r.HeldSeconds,
			opt(r.RoundTripsPerTick, "%.1f"), bytesSize(r.HeapBytesPerLease), r.Lost, releaseTime(r), mark(MeetsTarget(r)))
	}
	for _, r := range g.Rows {
		if r.FirstLost != "" {
			fmt.Fprintf(w, "\n%s, %d leases: the first lease lost ended with: %s\n", r.Backend, r.Leases, r.FirstLost)
		}
	}
	fmt.Fprintln(w)
	for _, grp := range growthGroups(g) {
		fmt.Fprintf(w, "- %s: %s\n", grp[0].Backend, verdict(grp))
	}
	_, err := fmt.Fprintln(w, "\nA tick is the watchdog's period, TTL/3: ticks = held time ÷ (TTL/3). Client memory/lease is the Go heap in use "+
		"(HeapAlloc after a GC) once every lease is taken, minus before, over the leases; before is read once each of the 16 goroutines "+
		"taking them has taken one lease (not refreshed, not counted), so that the connections the client opens for them are not counted "+
		"as the leases'. Release all: ReleaseAll of every lease "+
		"after the hold; a release still running at its bound was cut short by closing the driver.")
	return err
}

// releaseTime is how long r's release took, or its bound if cut short.
func releaseTime(r baseline.LeaseReport) string {
	if r.ReleaseCut {
		return fmt.Sprintf("> %.0f (cut short)", r.ReleaseSeconds)
	}
	return fmt.Sprintf("%.2f", r.ReleaseSeconds)
}

// verdict judges a backend at the most leases it was asked to hold (the
// last of rows), then names any smaller run that missed the targets: at
// few leases the client's fixed cost (its connections) weighs more per
// lease.
func verdict(rows []baseline.LeaseReport) string {
	last := rows[len(rows)-1]
	s := fmt.Sprintf("%s at %d leases%s", mark(MeetsTarget(last)), last.Leases, miss(last, " (", ")"))
	var missed []string
	for _, r := range rows[:len(rows)-1] {
		if !MeetsTarget(r) {
			missed = append(missed, fmt.Sprintf("%d leases%s", r.Leases, miss(r, ": ", "")))
		}
	}
	if len(missed) > 0 {
		s += "; ✗ at " + strings.Join(missed, ", ")
	}
	return s
}

// miss says how r missed the targets, between open and close; "" when
// it met them.
func miss(r baseline.LeaseReport, open, close string) string {
	switch {
	case r.Error != "":
		return open + "failed" + close
	case r.Lost > MaxLost:
		return fmt.Sprintf("%s%d lost%s", open, r.Lost, close)
	case r.HeapBytesPerLease > MaxHeapPerLease:
		return open + bytesSize(r.HeapBytesPerLease) + " per lease" + close
	}
	return ""
}

func mark(ok bool) string {
	if ok {
		return "✓"
	}
	return "✗"
}

// bytesSize formats a size in bytes, in KiB from 1 KiB up.
func bytesSize(b float64) string {
	if b >= 1024 {
		return fmt.Sprintf("%.2f KiB", b/1024)
	}
	return fmt.Sprintf("%.0f B", b)
}
