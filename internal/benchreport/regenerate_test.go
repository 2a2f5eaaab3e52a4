package benchreport_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/dlockdev/dlock/internal/baseline"
	"github.com/dlockdev/dlock/internal/benchreport"
	"github.com/dlockdev/dlock/internal/testserver"
)

// Environment of TestRegenerateBench (run it with `make bench-readme`).
const (
	envUpdate   = "DLOCK_BENCH_UPDATE"   // 1: run and rewrite the docs
	envDuration = "DLOCK_BENCH_DURATION" // each side's time per workload (default 3s), in 6 alternating slices
	envLeases   = "DLOCK_BENCH_LEASES"   // leases held per backend (default 10000)
)

// TestRegenerateBench starts every backend's test server, runs `dlock
// bench --compare` and `--leases` on each, and rewrites
// docs/benchmarks.md and docs/benchmarks.svg. It is skipped unless
// DLOCK_BENCH_UPDATE=1: it takes minutes and its figures are the
// machine's, not a pass/fail verdict.
func TestRegenerateBench(t *testing.T) {
	if os.Getenv(envUpdate) != "1" {
		t.Skipf("set %s=1 (or run make bench-readme) to measure and rewrite docs/benchmarks.md", envUpdate)
	}
	d := envDurationOr(t, 3*time.Second)
	leases := 10000
	if v := os.Getenv(envLeases); v != "" {
		if _, err := fmt.Sscan(v, &leases); err != nil || leases < 1 {
			t.Fatalf("%s=%q: want a positive number", envLeases, v)
		}
	}
	urls := serverURLs(t)
	ctx := context.Background()
	var cs []baseline.Comparison
	var lrs []baseline.LeaseReport
	for _, u := range urls {
		tg, err := baseline.Open(ctx, u.url, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		got, err := baseline.Compare(ctx, tg, baseline.Config{Duration: d, Rounds: 6, Prefix: "regen/"}, func(c baseline.Comparison) {
			t.Logf("%s %s: %.0f vs %.0f ops/s, ratio %.2f", c.Backend, c.Workload, c.Dlock.PerSec, c.Baseline.PerSec, c.Ratio)
		})
		if err == nil && u.leases {
			r, herr := baseline.HoldLeases(ctx, tg, leases, 6*time.Second, 6*time.Second, "regen-leases/")
			if herr != nil {
				// A backend that cannot hold them all is a finding, not a
				// reason to lose the rest of the run.
				r = baseline.LeaseReport{Backend: tg.Backend, Leases: leases, Error: firstLine(herr)}
			}
			t.Logf("%s: %+v", u.name, r)
			lrs = append(lrs, r)
		}
		tg.Close()
		if err != nil {
			t.Fatalf("%s: %v", u.name, err)
		}
		cs = append(cs, got...)
	}
	writeDocs(t, cs, lrs, d)
}

func envDurationOr(t *testing.T, def time.Duration) time.Duration {
	v := os.Getenv(envDuration)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 100*time.Millisecond {
		t.Fatalf("%s=%q: want a duration of at least 100ms", envDuration, v)
	}
	return d
}

type target struct {
	name, url string
	leases    bool // also hold many leases (not advisory: a connection each)
}

// serverURLs starts the servers, in the order of the docs.
func serverURLs(t *testing.T) []target {
	pg := testserver.Postgres(t)
	var nodes []string
	for range 3 {
		nodes = append(nodes, testserver.Redis(t).Addr)
	}
	return []target{
		{"postgres advisory", pg.NewDatabase(t) + "&mode=advisory", false},
		{"postgres lease", pg.NewDatabase(t) + "&mode=lease", true},
		{"etcd", testserver.Etcd(t).URL(), true},
		{"redis", testserver.Redis(t).URL(), true},
		{"redlock", "redlock://" + strings.Join(nodes, ","), true},
		{"file", "file://" + filepath.Join(t.TempDir(), "bench.db"), true},
	}
}

// writeDocs rewrites docs/benchmarks.md and docs/benchmarks.svg.
func writeDocs(t *testing.T, cs []baseline.Comparison, lrs []baseline.LeaseReport, d time.Duration) {
	var svg bytes.Buffer
	if err := benchreport.WriteSVG(&svg, cs, "dlock vs hand-written baseline, ops/s ratio (same run)"); err != nil {
		t.Fatal(err)
	}
	var md bytes.Buffer
	fmt.Fprintf(&md, docHead, time.Now().UTC().Format("2006-01-02"), machine(), d)
	if err := benchreport.WriteMarkdown(&md, cs); err != nil {
		t.Fatal(err)
	}
	md.WriteString(leaseHead)
	if err := benchreport.WriteLeasesMarkdown(&md, lrs); err != nil {
		t.Fatal(err)
	}
	md.WriteString(docTail)
	docs := filepath.Join("..", "..", "docs")
	md.WriteString(byHand(t, filepath.Join(docs, "benchmarks.md")))
	for name, b := range map[string][]byte{"benchmarks.md": md.Bytes(), "benchmarks.svg": svg.Bytes()} {
		if err := os.WriteFile(filepath.Join(docs, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("wrote %s/benchmarks.md and benchmarks.svg", docs)
}

// handMarker starts the part of docs/benchmarks.md measured by hand (the
// primitives: `dlock bench --election` kills processes, `--semaphore`),
// which a regeneration keeps as it is.
const handMarker = "<!-- Measured by hand below this line; make bench-readme keeps it. -->"

// byHand returns the part of the doc at path from handMarker on, or "".
func byHand(t *testing.T, path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if i := bytes.Index(b, []byte(handMarker)); i >= 0 {
		return "\n" + string(b[i:])
	}
	return ""
}

// firstLine is err's message up to its first line break.
func firstLine(err error) string {
	msg, _, _ := strings.Cut(err.Error(), "\n")
	return msg
}

// machine describes where the figures were measured.
func machine() string {
	cpu := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				cpu = strings.TrimSpace(strings.TrimLeft(v, " \t:"))
				break
			}
		}
	}
	var vs []string
	for _, c := range [][]string{{"redis-server", "--version"}, {"postgres", "--version"}, {"etcd", "--version"}} {
		out, err := exec.Command(c[0], c[1:]...).Output()
		if err == nil {
			vs = append(vs, strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0]))
		}
	}
	return fmt.Sprintf("%d × %s, %s/%s, %s; %s", runtime.NumCPU(), cpu, runtime.GOOS, runtime.GOARCH, runtime.Version(), strings.Join(vs, "; "))
}

const docHead = `<!-- Generated by TestRegenerateBench (make bench-readme). Do not edit by hand. -->
# Benchmarks: dlock against hand-written code

Measured %s on %s, by ` + "`make bench-readme`" + `, which starts real servers
(internal/testserver) and runs ` + "`dlock bench --compare`" + ` on each backend: dlock and the
code a user would write by hand instead, in the same process, each on its own instrumented
client, for %s per side and workload, in six alternating slices (dlock, baseline, baseline,
dlock, ...), so that load from other processes hits both sides alike.

- **uncontended-G**: G goroutines on one Locker, each on its own name: TryAcquire, Release.
- **contended-16**: 16 goroutines, each with its own Locker (its own Session for etcd's Mutex,
  its own pooled connection for a blocking advisory lock), on one name: Acquire (waiting),
  Release, pause 1 ms.
- **ratio** = dlock ops/s ÷ baseline ops/s. Ratios are what to compare: the machine is shared
  and absolute rates drift between runs.

Run one backend yourself: ` + "`dlock bench --compare --url URL`" + ` (` + "`--json`" + `, ` + "`--format markdown`" + `,
` + "`--svg chart.svg`" + `).

![dlock vs baseline](benchmarks.svg)

`

const leaseHead = `
### Holding many leases

` + "`dlock bench --leases N`" + ` takes N leases on one Locker (TTL 6 s, so the watchdog refreshes every
2 s), holds them 6 s, and counts what the refreshes cost. Postgres advisory mode is not run:
each advisory lock pins its own connection.

`

const docTail = `
Regenerate: ` + "`make bench-readme`" + ` (DLOCK_BENCH_DURATION=3s and DLOCK_BENCH_LEASES=10000 by
default; the servers must be on PATH as for ` + "`make test`" + `).
`

// envOne names the backends TestBenchOne measures (comma-separated names
// of serverURLs' targets, e.g. "postgres lease,redis").
const envOne = "DLOCK_BENCH_ONE"

// TestBenchOne starts the test servers and compares dlock with the
// baseline on the backends named in DLOCK_BENCH_ONE, printing the table
// and writing no file: a driver's author measures a change with it,
//
//	DLOCK_BENCH_ONE='postgres lease' go test -run TestBenchOne -v ./internal/benchreport
//
// DLOCK_BENCH_DURATION sets each side's time per workload (default 3s).
func TestBenchOne(t *testing.T) {
	only := os.Getenv(envOne)
	if only == "" {
		t.Skipf("set %s to the backends to measure (one of postgres advisory, postgres lease, etcd, redis, redlock, file)", envOne)
	}
	d := envDurationOr(t, 3*time.Second)
	want := map[string]bool{}
	for n := range strings.SplitSeq(only, ",") {
		want[strings.TrimSpace(n)] = true
	}
	ctx := context.Background()
	var cs []baseline.Comparison
	for _, u := range serverURLs(t) {
		if !want[u.name] {
			continue
		}
		delete(want, u.name)
		tg, err := baseline.Open(ctx, u.url, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		got, err := baseline.Compare(ctx, tg, baseline.Config{Duration: d, Rounds: 6, Prefix: "one/"}, nil)
		tg.Close()
		if err != nil {
			t.Fatalf("%s: %v", u.name, err)
		}
		cs = append(cs, got...)
	}
	if len(want) > 0 {
		t.Fatalf("%s names unknown backends: %v", envOne, want)
	}
	var md bytes.Buffer
	if err := benchreport.WriteMarkdown(&md, cs); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", md.String())
}
