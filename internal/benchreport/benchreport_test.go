package benchreport_test

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/dlockdev/dlock/internal/baseline"
	"github.com/dlockdev/dlock/internal/benchreport"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/jackc/pgx/v5/pgxpool.(*Pool).backgroundHealthCheck"))
}

func f(v float64) *float64 { return &v }

// sample is a comparison table of two backends, one ratio off the chart.
// handoff is m with its handoff p50 set to ms.
func handoff(m baseline.Measure, ms float64) baseline.Measure {
	m.HandoffP50Ms = ms
	return m
}

func sample() []baseline.Comparison {
	m := func(rate, rt float64) baseline.Measure {
		return baseline.Measure{Ops: 100, PerSec: rate, P50Ms: 1, P99Ms: 2, RoundTrips: f(rt)}
	}
	return []baseline.Comparison{
		{Backend: "redis", Workload: "uncontended-1", BaselineImpl: "SET <NX> & co", Dlock: m(5586, 3), Baseline: m(7696, 3), Ratio: 0.7258},
		{Backend: "redis", Workload: "contended-16", Contended: true, BaselineImpl: "busy poll", Dlock: m(3360, 5), Baseline: m(2920, 9), Ratio: 1.15},
		{Backend: "etcd", Workload: "contended-16", Contended: true, BaselineImpl: "Mutex", Dlock: handoff(m(900, 4), 1.9), Baseline: handoff(m(160, 6), 100),
			Ratio: 5.6, WriteP50Ms: 1.25, Write: "one etcd Put"},
	}
}

func TestWriteSVG(t *testing.T) {
	var b bytes.Buffer
	if err := benchreport.WriteSVG(&b, sample(), "dlock & baseline"); err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(bytes.NewReader(b.Bytes()))
	var rects int
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v\n%s", err, b.String())
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "rect" {
			rects++
		}
	}
	// Background, three legend swatches, two bars per workload.
	if want := 4 + 2*len(sample()); rects != want {
		t.Errorf("%d rects, want %d", rects, want)
	}
	for _, want := range []string{"0.73×", "1.15×", "5.60×", "»", "redis", "etcd", "dlock &amp; baseline", "5586 vs 7696 ops/s"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("SVG lacks %q", want)
		}
	}
}

func TestWriteMarkdownAndTable(t *testing.T) {
	var md, tb bytes.Buffer
	if err := benchreport.WriteMarkdown(&md, sample()); err != nil {
		t.Fatal(err)
	}
	if err := benchreport.WriteTable(&tb, sample()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"#### redis", "Baseline: SET <NX> & co; contended: busy poll.", "| uncontended-1 | 5586 | 7696 | **0.73×** |", "| 3.00 / 3.00 | n/a / n/a |"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
	ref := "contended-16: one etcd Put p50 1.25 ms in this run; handoff p50 1.52× that for dlock, 80.00× for the baseline"
	if !strings.Contains(md.String(), "- "+ref) {
		t.Errorf("markdown lacks %q:\n%s", "- "+ref, md.String())
	}
	if strings.Count(tb.String(), "one etcd Put") != 1 {
		t.Errorf("table: want the Put line once, for etcd only:\n%s", tb.String())
	}
	for _, want := range []string{"redis: dlock against SET <NX> & co; contended: busy poll", "etcd: dlock against Mutex", "0.73", "n/a", ref} {
		if !strings.Contains(tb.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, tb.String())
		}
	}
}

func TestWriteMarkdownListsFailures(t *testing.T) {
	cs := sample()
	cs[0].Dlock.Errors, cs[0].Dlock.FirstError = 2, "no majority"
	var md bytes.Buffer
	if err := benchreport.WriteMarkdown(&md, cs); err != nil {
		t.Fatal(err)
	}
	if want := "Failed operations in uncontended-1: dlock 2, baseline 0 (first: no majority)."; !strings.Contains(md.String(), want) {
		t.Errorf("markdown lacks %q:\n%s", want, md.String())
	}
	if strings.Count(md.String(), "Failed operations") != 1 {
		t.Errorf("failures listed for rows without any:\n%s", md.String())
	}
}
