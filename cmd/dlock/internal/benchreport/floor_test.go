package benchreport_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/dlockdev/dlock/cmd/dlock/internal/baseline"
	"github.com/dlockdev/dlock/cmd/dlock/internal/benchreport"
)

// TestWriteFloorsMarkdown: each cell is the median of its pairs of
// slices (the mean of the middle two for an even count) and their range,
// whatever order the rows came in; a backend measured at one goroutine
// count only shows a dash at the other.
func TestWriteFloorsMarkdown(t *testing.T) {
	f := &baseline.Floors{Measured: "2026-01-02", Machine: "2 × Test CPU", SecondsPerSide: 1, Rows: []baseline.FloorRow{
		{Backend: "redis", Goroutines: 16, Dlock: 90, Baseline: 100},
		{Backend: "redis", Goroutines: 1, Dlock: 95, Baseline: 100},
		{Backend: "redis", Goroutines: 1, Dlock: 80, Baseline: 100},
		{Backend: "redis", Goroutines: 1, Dlock: 88, Baseline: 100},
		{Backend: "redis", Goroutines: 16, Dlock: 70, Baseline: 100},
		{Backend: "etcd", Goroutines: 1, Dlock: 120, Baseline: 100},
	}}
	var b bytes.Buffer
	if err := benchreport.WriteFloorsMarkdown(&b, f); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"Measured 2026-01-02 on 2 × Test CPU",
		"| backend | 1 goroutine | 16 goroutines |",
		"| redis | 0.88× (0.80–0.95, 3 pairs) | 0.80× (0.70–0.90, 2 pairs) |",
		"| etcd | 1.20× (1.20–1.20, 1 pairs) | — |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q:\n%s", want, out)
		}
	}
	if strings.Index(out, "| redis") > strings.Index(out, "| etcd") {
		t.Errorf("backends out of their first order:\n%s", out)
	}
}
