package benchreport_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dlockdev/dlock/cmd/dlock/internal/benchreport"
	"github.com/dlockdev/dlock/internal/docblock"
)

// envRender set to 1 makes TestBenchDocsCurrent rewrite the published
// blocks from the committed results instead of checking them (make
// bench-render: after a change to how they are rendered).
const envRender = "DLOCK_BENCH_RENDER"

// TestBenchDocsCurrent: every benchmark figure in docs/benchmarks.md, and
// docs/benchmarks.svg, is what the committed docs/benchmarks.json renders
// now, and README.md carries no benchmark block. A figure typed by hand,
// or left behind by a new results file, fails it.
func TestBenchDocsCurrent(t *testing.T) {
	r, err := benchreport.ReadResults(filepath.Join(root, benchreport.ResultsFile))
	if err != nil {
		t.Fatal(err)
	}
	var also []string
	for _, f := range benchreport.Unrendered {
		also = append(also, filepath.Join(root, f))
	}
	docblock.Verify(t, benchreport.Blocks(root, r), benchreport.BlockPrefix, os.Getenv(envRender) == "1",
		"make bench-render (or make bench-readme to measure anew)", also...)
}

// TestBenchDocsCatchEdits: the check of TestBenchDocsCurrent fails when
// one figure of the summary is changed by hand, and when the results
// change under the docs.
func TestBenchDocsCatchEdits(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{benchreport.ResultsFile, benchreport.DocFile, benchreport.ChartFile} {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r, err := benchreport.ReadResults(filepath.Join(dir, benchreport.ResultsFile))
	if err != nil {
		t.Fatal(err)
	}
	if errs := docblock.Stale(benchreport.Blocks(dir, r)); len(errs) != 0 {
		t.Fatalf("the copies are stale already: %v", errs)
	}
	md := filepath.Join(dir, benchreport.DocFile)
	b, _ := os.ReadFile(md)
	summary, err := docblock.Extract(string(b), "bench-summary")
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(summary, "×", "0×", 1)
	if edited == summary {
		t.Fatalf("no ratio in the summary:\n%s", summary)
	}
	doc, _ := docblock.Replace(string(b), "bench-summary", edited)
	if err := os.WriteFile(md, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	errs := docblock.Stale(benchreport.Blocks(dir, r))
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "benchmarks.md: block bench-summary: stale") {
		t.Errorf("a ratio changed by hand in the summary: Stale = %v", errs)
	}
	r.Comparisons[0].Ratio += 0.5
	if errs := docblock.Stale(benchreport.Blocks(dir, r)); len(errs) < 3 {
		t.Errorf("a ratio changed in the results: %d stale blocks (%v), want the summary, the tables and the chart", len(errs), errs)
	}
}
