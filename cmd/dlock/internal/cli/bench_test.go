package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/cmd/dlock/internal/baseline"
	"github.com/dlockdev/dlock/cmd/dlock/internal/benchreport"
	"github.com/dlockdev/dlock/internal/testing/testserver"
)

// benchOps is each workload's --ops in these tests: a count, so that
// every side does exactly as many whatever the machine's load.
const benchOps = 40

// compareJSON runs `bench --compare --json` on url and decodes its records.
func compareJSON(t *testing.T, url string) []baseline.Comparison {
	t.Helper()
	tio, out, _ := testIO()
	opts := &benchOptions{URL: url, Ops: benchOps, TTL: 10 * time.Second, JSON: true, Compare: true}
	if err := runBench(context.Background(), opts, tio); err != nil {
		t.Fatal(err)
	}
	var cs []baseline.Comparison
	dec := json.NewDecoder(strings.NewReader(out.String()))
	for {
		var c baseline.Comparison
		if err := dec.Decode(&c); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("%v in output:\n%s", err, out)
		}
		cs = append(cs, c)
	}
	if len(cs) != len(benchWorkloads) {
		t.Fatalf("%d records, want %d:\n%s", len(cs), len(benchWorkloads), out)
	}
	for _, c := range cs {
		for side, m := range map[string]baseline.Measure{"dlock": c.Dlock, "baseline": c.Baseline} {
			if m.Ops != benchOps || m.Errors != 0 || m.Violations != 0 {
				t.Errorf("%s %s: want %d ops, no error or violation: %+v", c.Workload, side, benchOps, m)
			}
		}
		if c.Ratio <= 0 {
			t.Errorf("%s: ratio %v", c.Workload, c.Ratio)
		}
	}
	return cs
}

func TestBenchCompareFileTable(t *testing.T) {
	tio, out, _ := testIO()
	svg := filepath.Join(t.TempDir(), "chart.svg")
	opts := &benchOptions{URL: fileURL(t), Ops: benchOps, TTL: 10 * time.Second, Compare: true, SVG: svg}
	if err := runBench(context.Background(), opts, tio); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"file: dlock against SQLite INSERT OR IGNORE", "uncontended-64", "contended-16", "baseline", "n/a",
		"poll every 100µs", "busy poll (ref.)", "RATIO: ", "VIOLATIONS: "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	checkSVG(t, svg, "uncontended-1", "contended-16", "file")
}

// checkSVG fails unless path is well-formed XML with an svg root that
// mentions every want.
func checkSVG(t *testing.T, path string, wants ...string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(bytes.NewReader(b))
	root := ""
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("chart is not well-formed XML: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok && root == "" {
			root = se.Name.Local
		}
	}
	if root != "svg" {
		t.Errorf("chart root element %q, want svg", root)
	}
	for _, w := range wants {
		if !bytes.Contains(b, []byte(w)) {
			t.Errorf("chart lacks %q", w)
		}
	}
}

func TestBenchCompareRedis(t *testing.T) {
	srv := testserver.Redis(t)
	for _, c := range compareJSON(t, srv.URL()) {
		if c.Backend != "redis" || c.Dlock.RoundTrips == nil || c.Baseline.RoundTrips == nil {
			t.Fatalf("%s: backend %q, round trips %v / %v", c.Workload, c.Backend, c.Dlock.RoundTrips, c.Baseline.RoundTrips)
		}
		// An EVALSHA to acquire, one to release: the uncontended
		// baseline's cycle is exactly two commands.
		if !c.Contended && *c.Baseline.RoundTrips != 2 {
			t.Errorf("%s: baseline %v round trips a cycle, want exactly 2", c.Workload, *c.Baseline.RoundTrips)
		}
		// Calls of dlock's goroutines sent at the same moment share a
		// pipeline: less than one round trip a cycle, but never none.
		if *c.Dlock.RoundTrips <= 0 {
			t.Errorf("%s: dlock %v round trips a cycle", c.Workload, *c.Dlock.RoundTrips)
		}
		if c.Dlock.ServerUsec == nil || c.Baseline.ServerUsec == nil {
			t.Errorf("%s: server time not measured", c.Workload)
		}
	}
}

func TestBenchComparePostgres(t *testing.T) {
	db := testserver.Postgres(t).NewDatabase(t)
	for _, c := range compareJSON(t, db+"&mode=advisory") {
		// SELECT pg_try_advisory_lock, SELECT pg_advisory_unlock.
		if !c.Contended && (c.Baseline.RoundTrips == nil || *c.Baseline.RoundTrips != 2) {
			t.Errorf("%s: baseline round trips %v, want exactly 2", c.Workload, c.Baseline.RoundTrips)
		}
		if c.Dlock.RoundTrips == nil || *c.Dlock.RoundTrips < 2 {
			t.Errorf("%s: dlock round trips %v, want at least 2", c.Workload, c.Dlock.RoundTrips)
		}
	}
}

func TestBenchCompareMarkdown(t *testing.T) {
	tio, out, _ := testIO()
	opts := &benchOptions{URL: fileURL(t), Ops: benchOps, TTL: 10 * time.Second, Compare: true, Format: "markdown"}
	if err := runBench(context.Background(), opts, tio); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "#### file") || !strings.Contains(out.String(), "| uncontended-16 |") {
		t.Errorf("markdown output:\n%s", out)
	}
}

func TestBenchLeases(t *testing.T) {
	srv := testserver.Redis(t)
	tio, out, _ := testIO()
	// A 3 s TTL is refreshed every second: held 2.5 s, each lease is
	// refreshed at least once unless its first refresh is 1.5 s late, and
	// lost only if none comes for 3 s.
	opts := &benchOptions{URL: srv.URL(), Leases: 300, Duration: 2500 * time.Millisecond, TTL: 3 * time.Second, JSON: true}
	if err := runBench(context.Background(), opts, tio); err != nil {
		t.Fatal(err)
	}
	var r baseline.LeaseReport
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if r.Leases != 300 || r.Lost != 0 || r.Refreshes < 300 || r.RefreshCalls == 0 || r.RoundTrips == nil || *r.RoundTrips == 0 {
		t.Errorf("lease report %+v", r)
	}
}

func TestBenchCompareUnknownBackend(t *testing.T) {
	tio, _, _ := testIO()
	err := runBench(context.Background(), &benchOptions{URL: memURL(t), Compare: true}, tio)
	if err == nil || !strings.Contains(err.Error(), `"mem"`) {
		t.Errorf("compare on mem:// = %v, want an error naming the scheme", err)
	}
}

func TestBenchRejectsBadFlags(t *testing.T) {
	for _, o := range []benchOptions{
		{Compare: true, Format: "xml"},
		{SVG: "x.svg"},
		{Format: "markdown"},
		{Leases: -1},
		{Leases: maxBenchLeases + 1},
		{Leases: 10, Compare: true},
		{Compare: true, JSON: true, Format: "markdown"},
		{Election: true, Semaphore: 4},
		{Election: true, Leases: 10},
		{Election: true, Rounds: maxBenchRounds + 1},
		{Semaphore: dlock.MaxPermits + 1},
		{Semaphore: 4, Goroutines: -1},
		{Semaphore: 4, Hold: 2 * maxBenchHold},
		{Ops: -1},
		{Ops: maxBenchOps + 1},
		{Ops: 5, Leases: 10},
		{Ops: 5, Election: true},
	} {
		tio, _, _ := testIO()
		o.URL = memURL(t)
		if err := runBench(context.Background(), &o, tio); codeOf(err) != ExitUsage {
			t.Errorf("%+v: got %v, want a usage error", o, err)
		}
	}
}

// TestBenchSemaphore: a short --semaphore 4 run on the embedded backend
// grants permits, never more than 4 at once, and prints its table.
func TestBenchSemaphore(t *testing.T) {
	url := fileURL(t)
	tio, out, _ := testIO()
	opts := &benchOptions{URL: url, Ops: 200, TTL: 10 * time.Second, JSON: true, Semaphore: 4, Hold: time.Millisecond}
	if err := runBench(context.Background(), opts, tio); err != nil {
		t.Fatal(err)
	}
	var r benchreport.Semaphore
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if r.Workload != "semaphore-4" || r.Backend != "file" || r.Goroutines != defaultBenchWorkers || r.Ops != 200 || r.Errors != 0 ||
		r.Violations != 0 || r.MaxHolders < 1 || r.MaxHolders > 4 || r.WaitP99Ms < r.WaitP50Ms {
		t.Errorf("semaphore report %+v", r)
	}
	tio, out, _ = testIO()
	opts = &benchOptions{URL: url, Ops: benchOps, TTL: 10 * time.Second, Semaphore: 4, Goroutines: 8}
	if err := runBench(context.Background(), opts, tio); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"MAX HOLDERS", "VIOLATIONS", "semaphore-4", "(at most 4)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

// TestBenchElection: two --election rounds on the embedded backend, each
// killing a `dlock elect` process: every round's new term is timed and
// the summary is consistent (no wall-clock bound: the machine is shared).
func TestBenchElection(t *testing.T) {
	tio, out, errb := testIO()
	opts := &benchOptions{URL: fileURL(t), TTL: 500 * time.Millisecond, JSON: true, Election: true, Rounds: 2, Exe: dlockBin}
	if err := runBench(context.Background(), opts, tio); err != nil {
		t.Fatalf("%v\n%s", err, errb)
	}
	var r benchreport.Election
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if r.Workload != "election-failover" || r.Rounds != 2 || len(r.FailoverMs) != 2 || len(r.LeftMs) != 2 ||
		r.TTLSeconds != 0.5 || r.MinMs <= 0 || r.MinMs > r.P50Ms || r.P50Ms > r.MaxMs || r.PastExpiryP50Ms == nil {
		t.Errorf("election report %+v", r)
	}
	if n := strings.Count(errb.String(), "after the leader's SIGKILL"); n != 2 {
		t.Errorf("%d progress lines, want 2:\n%s", n, errb)
	}
	var tb bytes.Buffer
	if err := writeElectionTable(&IO{Out: &tb}, r); err != nil || !strings.Contains(tb.String(), "P50/TTL") {
		t.Errorf("table (%v):\n%s", err, tb.String())
	}
}
