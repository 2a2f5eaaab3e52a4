package benchreport

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"path/filepath"
	"slices"

	"github.com/dlockdev/dlock/cmd/dlock/internal/baseline"
	"github.com/dlockdev/dlock/internal/docblock"
)

// FloorsFile holds the floors of dlock's messages (baseline.Floors),
// relative to the repository's root; FloorBlock is the table of
// docs/benchmarks.md rendered from it.
const (
	FloorsFile = "docs/floors.json"
	FloorBlock = "bench-floor"
)

// floorNote opens the rendered floor block.
const floorNote = "<!-- Rendered from docs/floors.json by `make bench-floor`; TestBenchDocsCurrent checks it. Do not edit. -->\n"

// FloorBlocks are the blocks rendered from f in the repository at root:
// the floor table of docs/benchmarks.md.
func FloorBlocks(root string, f *baseline.Floors) []docblock.Block {
	return []docblock.Block{{File: filepath.Join(root, DocFile), Name: FloorBlock, Render: func() (string, error) {
		var b bytes.Buffer
		b.WriteString(floorNote)
		err := WriteFloorsMarkdown(&b, f)
		return b.String(), err
	}}}
}

// WriteFloorsMarkdown writes f as a table: per backend and goroutine
// count, the median of dlock's rate over the baseline's, and its range.
func WriteFloorsMarkdown(w io.Writer, f *baseline.Floors) error {
	var backends []string
	var gs []int
	ratios := map[string]map[int][]float64{}
	for _, r := range f.Rows {
		if ratios[r.Backend] == nil {
			backends = append(backends, r.Backend)
			ratios[r.Backend] = map[int][]float64{}
		}
		if !slices.Contains(gs, r.Goroutines) {
			gs = append(gs, r.Goroutines)
		}
		ratios[r.Backend][r.Goroutines] = append(ratios[r.Backend][r.Goroutines], r.Ratio())
	}
	slices.Sort(gs)
	fmt.Fprintf(w, "Measured %s on %s: each side's messages for %s a slice, in alternation; dlock's cycles a second "+
		"over the baseline's, the median of every pair of slices and, in parentheses, their range and count.\n\n", f.Measured, f.Machine, seconds(f.SecondsPerSide))
	fmt.Fprint(w, "| backend |")
	for _, g := range gs {
		fmt.Fprintf(w, " %d goroutine%s |", g, plural(g))
	}
	fmt.Fprint(w, "\n|---|")
	for range gs {
		fmt.Fprint(w, "---|")
	}
	fmt.Fprintln(w)
	for _, be := range backends {
		fmt.Fprintf(w, "| %s |", be)
		for _, g := range gs {
			rs := slices.SortedFunc(slices.Values(ratios[be][g]), cmp.Compare[float64])
			if len(rs) == 0 {
				fmt.Fprint(w, " — |")
				continue
			}
			fmt.Fprintf(w, " %.2f× (%.2f–%.2f, %d pairs) |", median(rs), rs[0], rs[len(rs)-1], len(rs))
		}
		fmt.Fprintln(w)
	}
	return nil
}

// median is the middle of sorted rs (the mean of the two middle ones
// when there are an even number).
func median(rs []float64) float64 {
	n := len(rs)
	if n%2 == 1 {
		return rs[n/2]
	}
	return (rs[n/2-1] + rs[n/2]) / 2
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
