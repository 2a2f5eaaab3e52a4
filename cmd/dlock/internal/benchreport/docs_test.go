package benchreport_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dlockdev/dlock/cmd/dlock/internal/baseline"
	"github.com/dlockdev/dlock/cmd/dlock/internal/benchreport"
	"github.com/dlockdev/dlock/internal/docblock"
)

// envRender set to 1 makes TestBenchDocsCurrent rewrite the published
// blocks from the committed results instead of checking them (make
// bench-render: after a change to how they are rendered).
const envRender = "DLOCK_BENCH_RENDER"

// TestBenchDocsCurrent: every benchmark figure in docs/benchmarks.md, and
// docs/benchmarks.svg, is what the committed docs/benchmarks.json renders
// now, its growth table and docs/growth.svg what docs/growth.json renders,
// its profile block what docs/profiles.json renders, and README.md carries no benchmark block. A figure typed by hand, or
// left behind by a new results file, fails it.
func TestBenchDocsCurrent(t *testing.T) {
	r, err := benchreport.ReadResults(filepath.Join(root, benchreport.ResultsFile))
	if err != nil {
		t.Fatal(err)
	}
	g, err := benchreport.ReadGrowth(filepath.Join(root, benchreport.GrowthResultsFile))
	if err != nil {
		t.Fatal(err)
	}
	p, err := benchreport.ReadProfiles(filepath.Join(root, benchreport.ProfilesFile))
	if err != nil {
		t.Fatal(err)
	}
	f, err := baseline.ReadFloors(filepath.Join(root, benchreport.FloorsFile))
	if err != nil {
		t.Fatal(err)
	}
	var also []string
	for _, f := range benchreport.Unrendered {
		also = append(also, filepath.Join(root, f))
	}
	blocks := append(benchreport.Blocks(root, r), benchreport.GrowthBlocks(root, g)...)
	blocks = append(blocks, benchreport.ProfileBlocks(root, p)...)
	blocks = append(blocks, benchreport.FloorBlocks(root, f)...)
	docblock.Verify(t, blocks, benchreport.BlockPrefix, os.Getenv(envRender) == "1",
		"make bench-render (or make bench-readme / make bench-growth / make bench-profile / make bench-floor to measure anew)", also...)
}

// TestGrowthDocsCatchEdits: the check of TestBenchDocsCurrent fails when
// a figure of the growth table is changed by hand, and when
// docs/growth.json changes under the table and the chart.
func TestGrowthDocsCatchEdits(t *testing.T) {
	dir := copyDocs(t, benchreport.GrowthResultsFile, benchreport.DocFile, benchreport.GrowthChartFile)
	g, err := benchreport.ReadGrowth(filepath.Join(dir, benchreport.GrowthResultsFile))
	if err != nil {
		t.Fatal(err)
	}
	if errs := docblock.Stale(benchreport.GrowthBlocks(dir, g)); len(errs) != 0 {
		t.Fatalf("the copies are stale already: %v", errs)
	}
	md := filepath.Join(dir, benchreport.DocFile)
	b, _ := os.ReadFile(md)
	table, err := docblock.Extract(string(b), benchreport.GrowthBlock)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(table, "✗", "✓", 1)
	if edited == table {
		edited = strings.Replace(table, "✓", "✗", 1)
	}
	doc, _ := docblock.Replace(string(b), benchreport.GrowthBlock, edited)
	if err := os.WriteFile(md, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	errs := docblock.Stale(benchreport.GrowthBlocks(dir, g))
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "benchmarks.md: block bench-growth: stale") {
		t.Errorf("a verdict changed by hand in the growth table: Stale = %v", errs)
	}
	g.Rows[0].HeapBytesPerLease += 700
	if errs := docblock.Stale(benchreport.GrowthBlocks(dir, g)); len(errs) != 2 {
		t.Errorf("a row's memory changed in the results: %d stale blocks (%v), want the table and the chart", len(errs), errs)
	}
}

// copyDocs copies files of the repository into a new directory, at the
// same relative paths, and returns it.
func copyDocs(t *testing.T, files ...string) string {
	dir := t.TempDir()
	for _, f := range files {
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
	return dir
}

// TestBenchDocsCatchEdits: the check of TestBenchDocsCurrent fails when
// one figure of the summary is changed by hand, and when the results
// change under the docs.
func TestBenchDocsCatchEdits(t *testing.T) {
	dir := copyDocs(t, benchreport.ResultsFile, benchreport.DocFile, benchreport.ChartFile)
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
