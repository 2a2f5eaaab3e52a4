package benchreport

import (
	"bytes"
	"fmt"
	"io"
	"path/filepath"

	"github.com/dlockdev/dlock/internal/docblock"
)

// BlockPrefix starts the name of every block this package renders.
const BlockPrefix = "bench-"

// Files of the published benchmarks, relative to the repository's root.
const (
	ResultsFile = "docs/benchmarks.json"
	DocFile     = "docs/benchmarks.md"
	ChartFile   = "docs/benchmarks.svg"
)

// Unrendered are the documents that carry no benchmark block: the README
// links to DocFile, so a block left there would have no renderer (see
// docblock.Verify).
var Unrendered = []string{"README.md"}

// ChartTitle is the title of docs/benchmarks.svg.
const ChartTitle = "dlock vs the strongest hand-written baseline, ops/s ratio (same run)"

// Blocks are every published block rendered from r, in the repository
// at root: docs/benchmarks.md's summary and tables; the chart.
func Blocks(root string, r *Results) []docblock.Block {
	doc := filepath.Join(root, DocFile)
	md := func(file, name string, write func(io.Writer) error) docblock.Block {
		return docblock.Block{File: file, Name: name, Render: func() (string, error) {
			var b bytes.Buffer
			b.WriteString(generatedNote)
			err := write(&b)
			return b.String(), err
		}}
	}
	return []docblock.Block{
		{File: doc, Name: "bench-summary", Render: func() (string, error) {
			var b bytes.Buffer
			err := WriteSummary(&b, r)
			return b.String(), err
		}},
		md(doc, "bench-measured", func(w io.Writer) error { return writeMeasured(w, r) }),
		md(doc, "bench-compare", func(w io.Writer) error { return WriteMarkdown(w, r.Comparisons) }),
		md(doc, "bench-leases", func(w io.Writer) error { return WriteLeasesMarkdown(w, r.Leases) }),
		md(doc, "bench-serve", func(w io.Writer) error { return WriteServeMarkdown(w, r.Serve) }),
		md(doc, "bench-election", func(w io.Writer) error { return WriteElectionsMarkdown(w, r.Elections) }),
		md(doc, "bench-semaphore", func(w io.Writer) error { return WriteSemaphoresMarkdown(w, r.Semaphores) }),
		{File: filepath.Join(root, ChartFile), Render: func() (string, error) {
			var b bytes.Buffer
			err := WriteSVG(&b, r.Comparisons, ChartTitle)
			return b.String(), err
		}},
	}
}

// writeMeasured says when, where and how long the results were measured.
func writeMeasured(w io.Writer, r *Results) error {
	_, err := fmt.Fprintf(w, "Measured %s on %s: each side %s per workload (each of the baseline's ways of waiting, "+
		"contended), in %d alternating slices.\n", r.Measured, r.Machine, seconds(r.SecondsPerSide), r.Rounds)
	return err
}
