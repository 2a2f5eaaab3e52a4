package benchreport_test

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/dlockdev/dlock/cmd/dlock/internal/baseline"
	"github.com/dlockdev/dlock/cmd/dlock/internal/benchreport"
)

// growthRow is a lease-holding report of n leases.
func growthRow(backend string, n int, rtPerTick, heap float64) baseline.LeaseReport {
	return baseline.LeaseReport{Backend: backend, Leases: n, TTLSeconds: 6, AcquireSeconds: float64(n) / 20000,
		HeldSeconds: 6, Ticks: 3, RoundTripsPerTick: f(rtPerTick), HeapBytesPerLease: heap, ReleaseSeconds: float64(n) / 10000}
}

// growthSample has two backends: redis within the targets at every N,
// etcd over 2 KiB at 10,000 leases and failed at 100,000.
func growthSample() *benchreport.Growth {
	etcdCut := growthRow("etcd", 10000, 91.7, 2600)
	etcdCut.ReleaseSeconds, etcdCut.ReleaseCut = 60, true
	return &benchreport.Growth{Measured: "2026-12-06", Machine: "2 × test CPU", Rows: []baseline.LeaseReport{
		growthRow("redis", 1000, 0.9999, 900),
		growthRow("redis", 10000, 10, 850),
		growthRow("redis", 100000, 100, 812.5),
		growthRow("etcd", 1000, 9.3, 1500),
		etcdCut,
		{Backend: "etcd", Leases: 100000, TTLSeconds: 6, Error: "benchwork: took 81234 of 100000 leases, then: context deadline exceeded"},
	}}
}

func TestWriteGrowthMarkdown(t *testing.T) {
	var b bytes.Buffer
	if err := benchreport.WriteGrowthMarkdown(&b, growthSample()); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, want := range []string{
		"Measured 2026-12-06 on 2 × test CPU.",
		"| redis | 100000 | 5.00 | 6.0 | 100.0 | 812 B | 0 | 10.00 | ✓ |",
		"| etcd | 1000 | 0.05 | 6.0 | 9.3 | 1.46 KiB | 0 | 0.10 | ✓ |",
		"| etcd | 10000 | 0.50 | 6.0 | 91.7 | 2.54 KiB | 0 | > 60 (cut short) | ✗ |",
		"| etcd | 100000 | failed: benchwork: took 81234 of 100000 leases, then: context deadline exceeded |",
		"- redis: ✓ at 100000 leases\n",
		"- etcd: ✗ at 100000 leases (failed); ✗ at 10000 leases: 2.54 KiB per lease\n",
		"ticks = held time ÷ (TTL/3)",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("growth table lacks %q:\n%s", want, md)
		}
	}
}

func TestGrowthVerdicts(t *testing.T) {
	ok := growthRow("redis", 1000, 1, 2048)
	lost := ok
	lost.Lost, lost.FirstLost = 1, "dlock: lease \"a\" lost: refresh: timeout"
	big := ok
	big.HeapBytesPerLease = 2049
	failed := ok
	failed.Error = "timeout"
	for _, c := range []struct {
		name string
		r    baseline.LeaseReport
		want bool
	}{{"2 KiB exactly", ok, true}, {"one lost", lost, false}, {"over 2 KiB", big, false}, {"failed", failed, false}} {
		if got := benchreport.MeetsTarget(c.r); got != c.want {
			t.Errorf("%s: MeetsTarget = %v, want %v", c.name, got, c.want)
		}
	}
	var b bytes.Buffer
	big.Leases = 10000
	g := &benchreport.Growth{Rows: []baseline.LeaseReport{ok, big}}
	if err := benchreport.WriteGrowthMarkdown(&b, g); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "- redis: ✗ at 10000 leases (2.00 KiB per lease)\n") {
		t.Errorf("over 2 KiB at the most leases is not the backend's verdict:\n%s", b.String())
	}
	b.Reset()
	g.Rows = []baseline.LeaseReport{lost, ok}
	if err := benchreport.WriteGrowthMarkdown(&b, g); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "- redis: ✓ at 1000 leases; ✗ at 1000 leases: 1 lost\n") {
		t.Errorf("a lease lost in a smaller run is not named:\n%s", b.String())
	}
	if !strings.Contains(b.String(), "redis, 1000 leases: the first lease lost ended with: dlock: lease \"a\" lost: refresh: timeout\n") {
		t.Errorf("the first loss's error is not told:\n%s", b.String())
	}
}

func TestWriteGrowthSVG(t *testing.T) {
	var b bytes.Buffer
	g := growthSample()
	g.Rows[4].Lost = 91 // etcd, 10,000 leases
	if err := benchreport.WriteGrowthSVG(&b, g); err != nil {
		t.Fatal(err)
	}
	svg := b.String()
	dec := xml.NewDecoder(strings.NewReader(svg))
	for {
		_, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v\n%s", err, svg)
		}
	}
	for _, want := range []string{
		benchreport.GrowthChartTitle,
		"refresh round trips per watchdog tick (log scale)",
		"client memory per lease (Go heap)",
		">1k<", ">10k<", ">100k<", // the x axis, one decade apart
		">1<", ">10<", ">100<", // the log y axis of round trips, from 1 (0.9999 is on it)
		"target ≤ 2 KiB",
		"<title>redis, 100000 leases: 100</title>",
		"<title>redis, 100000 leases: 812 B</title>",
		"<title>etcd, 10000 leases: 2.54 KiB, 91 lost</title>",
		"<title>etcd: benchwork: took 81234 of 100000 leases, then: context deadline exceeded</title>✗",
		">redis<", ">etcd<", // the legend
	} {
		if !strings.Contains(svg, want) {
			t.Errorf("chart lacks %q", want)
		}
	}
	if strings.Contains(svg, ">0.1<") {
		t.Errorf("the round trips' axis starts a decade below 0.9999")
	}
	if n := strings.Count(svg, `fill="#ffffff" stroke=`); n != 2 {
		t.Errorf("%d hollow points, want 2: the run with lost leases, in each panel", n)
	}
	if n := strings.Count(svg, "<polyline"); n != 4 {
		t.Errorf("%d lines, want 4: redis and etcd in each panel", n)
	}
	if strings.Contains(svg, "NaN") || strings.Contains(svg, "Inf") {
		t.Errorf("chart has a NaN or Inf coordinate:\n%s", svg)
	}
}

// TestGrowthXAxisIsLog: 1k, 10k and 100k leases are evenly spaced.
func TestGrowthXAxisIsLog(t *testing.T) {
	var b bytes.Buffer
	if err := benchreport.WriteGrowthSVG(&b, growthSample()); err != nil {
		t.Fatal(err)
	}
	var xs []string
	for line := range strings.Lines(b.String()) {
		if strings.Contains(line, `font-size="11">1k<`) || strings.Contains(line, `font-size="11">10k<`) || strings.Contains(line, `font-size="11">100k<`) {
			x, _, _ := strings.Cut(strings.TrimPrefix(line, `<text x="`), `"`)
			xs = append(xs, x)
		}
	}
	// Two panels, three ticks each: 104, 260, 416 and 584, 740, 896.
	want := []string{"104", "260", "416", "584", "740", "896"}
	if strings.Join(xs, " ") != strings.Join(want, " ") {
		t.Errorf("x ticks at %v, want %v", xs, want)
	}
}
