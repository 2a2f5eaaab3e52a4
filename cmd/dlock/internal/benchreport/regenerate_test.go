package benchreport_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/cmd/dlock/internal/baseline"
	"github.com/dlockdev/dlock/cmd/dlock/internal/benchreport"
	"github.com/dlockdev/dlock/cmd/dlock/internal/servebench"
	"github.com/dlockdev/dlock/internal/docblock"
	"github.com/dlockdev/dlock/internal/testing/testserver"

	_ "github.com/dlockdev/dlock/etcdlock"
	_ "github.com/dlockdev/dlock/filelock"
	_ "github.com/dlockdev/dlock/memlock"
	_ "github.com/dlockdev/dlock/pglock"
	_ "github.com/dlockdev/dlock/redislock"
)

// Environment of TestRegenerateBench (run it with `make bench-readme`).
const (
	envUpdate   = "DLOCK_BENCH_UPDATE"   // 1: measure, write docs/benchmarks.json and render the docs
	envDuration = "DLOCK_BENCH_DURATION" // each side's time per workload (default 3s), in 6 alternating slices
	envLeases   = "DLOCK_BENCH_LEASES"   // leases held per backend (default 10000)
	envRuns     = "DLOCK_BENCH_RUNS"     // times every backend is compared (default benchreport.DefaultRuns)
)

// root is the repository's root, from this package's directory.
const root = "../../../.."

// regenRounds is the alternating slices of each workload.
const regenRounds = 6

// TestRegenerateBench starts every backend's test server, runs `dlock
// bench --compare` on each, DefaultRuns times over all of them (Medians),
// and `--leases` on each, `--serve` on Redis, the file
// and the in-memory backend, and `--election` and `--semaphore` (the
// dlock binary, built here) on the backends they suit; it writes all of
// it to docs/benchmarks.json and renders from that file
// docs/benchmarks.md (its summary and tables) and docs/benchmarks.svg. It is
// skipped unless DLOCK_BENCH_UPDATE=1: it takes minutes and its figures
// are the machine's, not a pass/fail verdict.
func TestRegenerateBench(t *testing.T) {
	if os.Getenv(envUpdate) != "1" {
		t.Skipf("set %s=1 (or run make bench-readme) to measure and rewrite the published figures", envUpdate)
	}
	d := envDurationOr(t, 3*time.Second)
	r := &benchreport.Results{Measured: time.Now().UTC().Format("2006-01-02"), Machine: baseline.Machine(),
		SecondsPerSide: d.Seconds(), Rounds: regenRounds}
	targets := serverURLs(t, nil)
	runs := make([][]baseline.Comparison, envRunsOr(t, benchreport.DefaultRuns))
	for i := range runs {
		for _, u := range targets {
			cs, lr := compareOne(t, u, d, i == 0)
			runs[i] = append(runs[i], cs...)
			if lr != nil {
				r.Leases = append(r.Leases, *lr)
			}
		}
	}
	r.Comparisons, r.Figures = benchreport.Medians(runs)
	if len(runs) < 2 {
		r.Figures = nil
	}
	r.Serve = measureServe(t, targets, d)
	exe := buildDlock(t)
	for _, u := range targets {
		if u.primitives {
			r.Elections = append(r.Elections, runCLI[benchreport.Election](t, exe, u, "--election", "--ttl", "2s", "--rounds", "5"))
			r.Semaphores = append(r.Semaphores, runCLI[benchreport.Semaphore](t, exe, u, "--semaphore", "4", "--duration", d.String()))
		}
	}
	if err := benchreport.WriteResults(filepath.Join(root, benchreport.ResultsFile), r); err != nil {
		t.Fatal(err)
	}
	if err := docblock.Update(benchreport.Blocks(root, r)); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s and rendered %s and %s from it", benchreport.ResultsFile, benchreport.DocFile, benchreport.ChartFile)
}

// compareOne compares dlock with the baseline on u and, where u holds
// many leases and leases is set, measures that too.
func compareOne(t *testing.T, u target, d time.Duration, leases bool) ([]baseline.Comparison, *baseline.LeaseReport) {
	ctx := context.Background()
	tg, err := baseline.Open(ctx, u.url, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	cs, err := baseline.Compare(ctx, tg, baseline.Config{Duration: d, Rounds: regenRounds, Prefix: "regen/"}, func(c baseline.Comparison) {
		t.Logf("%s %s: %.0f vs %.0f ops/s (%s), ratio %.2f", c.Backend, c.Workload, c.Dlock.PerSec, c.Baseline.PerSec, c.BaselineImpl, c.Ratio)
	})
	if err != nil {
		t.Fatalf("%s: %v", u.name, err)
	}
	if !u.leases || !leases {
		return cs, nil
	}
	n := envLeasesOr(t, 10000)
	lr, err := baseline.HoldLeases(ctx, tg, n, 6*time.Second, 6*time.Second, "regen-leases/")
	if err != nil {
		// A backend that cannot hold them all is a finding, not a reason
		// to lose the rest of the run.
		lr = baseline.LeaseReport{Backend: tg.Backend, Leases: n, Error: firstLine(err)}
	}
	t.Logf("%s: %+v", u.name, lr)
	return cs, &lr
}

// measureServe runs `dlock bench --serve` on the targets that have it.
func measureServe(t *testing.T, targets []target, d time.Duration) []servebench.Report {
	var rs []servebench.Report
	for _, u := range append(targets, target{name: "mem", url: "mem://regen-serve", serve: true}) {
		if !u.serve {
			continue
		}
		ctx := context.Background()
		l, err := dlock.Open(ctx, u.url)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := servebench.Run(ctx, servebench.Config{Locker: l, Duration: d})
		_ = l.Close()
		if err != nil {
			t.Fatalf("%s: bench --serve: %v", u.name, err)
		}
		t.Logf("%s: serve %.0f / %.0f cycles/s", u.name, rep.Uncontended.HTTP.PerSecond, rep.Uncontended.Library.PerSecond)
		rs = append(rs, rep)
	}
	return rs
}

// buildDlock builds the dlock binary, which `bench --election` starts as
// its leaders.
func buildDlock(t *testing.T) string {
	exe := filepath.Join(t.TempDir(), "dlock")
	out, err := exec.Command("go", "build", "-o", exe, "../..").CombinedOutput()
	if err != nil {
		t.Fatalf("go build ./cmd/dlock: %v\n%s", err, out)
	}
	return exe
}

// runCLI runs `dlock bench ARGS --json` on u (by DLOCK_URL, never on a
// command line) and decodes its result, named for u.
func runCLI[R benchreport.Election | benchreport.Semaphore](t *testing.T, exe string, u target, args ...string) R {
	cmd := exec.Command(exe, append([]string{"bench", "--json"}, args...)...)
	cmd.Env = append(os.Environ(), dlock.EnvURL+"="+u.url)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: dlock bench %s: %v\n%s", u.name, strings.Join(args, " "), err, stderr.String())
	}
	var r R
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("%s: dlock bench %s: %v in %s", u.name, strings.Join(args, " "), err, out)
	}
	switch v := any(&r).(type) {
	case *benchreport.Election:
		v.Backend = u.backend
	case *benchreport.Semaphore:
		v.Backend = u.backend
	}
	t.Logf("%s: %s", u.name, out)
	return r
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

func envLeasesOr(t *testing.T, def int) int { return envPositiveOr(t, envLeases, def) }

// envPositiveOr is the positive number in the environment variable name,
// def when it is not set.
func envPositiveOr(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	var n int
	if _, err := fmt.Sscan(v, &n); err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive number", name, v)
	}
	return n
}

func envRunsOr(t *testing.T, def int) int { return envPositiveOr(t, envRuns, def) }

// target is one backend of the run.
type target struct {
	name, url string
	// backend is its name in the results (Comparison.Backend).
	backend string
	// leases: also hold many leases (not advisory: a connection each);
	// serve: also measure the HTTP API; primitives: also --election and
	// --semaphore.
	leases, serve, primitives bool
}

// serverURLs starts the servers of the targets that want names, in the
// order of the docs (nil: every one).
func serverURLs(t *testing.T, want func(name string) bool) []target {
	if want == nil {
		want = func(string) bool { return true }
	}
	var pg *testserver.PostgresServer
	postgres := func(mode string) string {
		if pg == nil {
			pg = testserver.Postgres(t)
		}
		return pg.NewDatabase(t) + "&mode=" + mode
	}
	var my *testserver.MariaDBServer
	mysql := func(mode string) string {
		if my == nil {
			my = testserver.MariaDB(t)
		}
		return my.URL(my.NewDatabase(t)) + "?mode=" + mode
	}
	redlock := func() string {
		var nodes []string
		for range 3 {
			nodes = append(nodes, testserver.Redis(t).Addr)
		}
		return "redlock://" + strings.Join(nodes, ",")
	}
	all := []struct {
		target
		url func() string
	}{
		{target{name: "postgres advisory", backend: "postgres-advisory", primitives: true}, func() string { return postgres("advisory") }},
		{target{name: "postgres lease", backend: "postgres-lease", leases: true, primitives: true}, func() string { return postgres("lease") }},
		{target{name: "mysql get_lock", backend: "mysql-get_lock"}, func() string { return mysql("get_lock") }},
		{target{name: "mysql lease", backend: "mysql-lease", leases: true}, func() string { return mysql("lease") }},
		{target{name: "etcd", backend: "etcd", leases: true, primitives: true}, func() string { return testserver.Etcd(t).URL() }},
		{target{name: "redis", backend: "redis", leases: true, serve: true, primitives: true}, func() string { return testserver.Redis(t).URL() }},
		{target{name: "redlock", backend: "redlock", leases: true}, redlock},
		{target{name: "zookeeper", backend: "zookeeper", leases: true}, func() string { return testserver.ZooKeeper(t).URL() }},
		{target{name: "file", backend: "file", leases: true, serve: true, primitives: true}, func() string {
			return "file://" + filepath.Join(t.TempDir(), "bench.db")
		}},
	}
	var out []target
	for _, a := range all {
		if want(a.name) {
			a.target.url = a.url()
			out = append(out, a.target)
		}
	}
	return out
}

// firstLine is err's message up to its first line break.
func firstLine(err error) string {
	msg, _, _ := strings.Cut(err.Error(), "\n")
	return msg
}

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
		t.Skipf("set %s to the backends to measure (one of postgres advisory, postgres lease, mysql get_lock, mysql lease, etcd, redis, redlock, zookeeper, file)", envOne)
	}
	d := envDurationOr(t, 3*time.Second)
	want := map[string]bool{}
	for n := range strings.SplitSeq(only, ",") {
		want[strings.TrimSpace(n)] = true
	}
	ctx := context.Background()
	var cs []baseline.Comparison
	for _, u := range serverURLs(t, func(name string) bool { return want[name] }) {
		delete(want, u.name)
		tg, err := baseline.Open(ctx, u.url, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		got, err := baseline.Compare(ctx, tg, baseline.Config{Duration: d, Rounds: regenRounds, Prefix: "one/"}, nil)
		tg.Close()
		if err != nil {
			t.Fatalf("%s: %v", u.name, err)
		}
		cs = append(cs, got...)
	}
	if len(want) > 0 {
		t.Fatalf("%s names unknown backends: %v", envOne, want)
	}
	var out bytes.Buffer
	if err := benchreport.WriteTable(&out, cs); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", out.String())
}
