package benchreport_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"
	"github.com/jackc/pgx/v5"

	"github.com/dlockdev/dlock/cmd/dlock/internal/baseline"
	"github.com/dlockdev/dlock/cmd/dlock/internal/benchreport"
	"github.com/dlockdev/dlock/internal/benchwork"
	"github.com/dlockdev/dlock/internal/docblock"
)

// envProfile set to 1 runs TestRegenerateProfiles (make bench-profile).
const envProfile = "DLOCK_PROFILE_UPDATE"

// The profiled workload: uncontended, profileG goroutines, each side
// alone for profileFor.
const (
	profileG   = 16
	profileFor = 3 * time.Second
)

// Paths of the standard load tools; a missing one is recorded, not a
// failure.
var (
	redisBenchmark = "/usr/bin/redis-benchmark"
	pgbench        = "/usr/lib/postgresql/15/bin/pgbench"
	mysqlslap      = "/usr/bin/mysqlslap"
)

// TestRegenerateProfiles profiles, for every backend that misses an
// uncontended target in docs/benchmarks.json, the uncontended workload at
// G = 16 on the dlock side alone and then on the baseline side alone (the
// test process's CPU: the servers are other processes), and for every
// backend that misses a contended target the contended workload the same
// way; runs the backend's standard load tool against the same server (and
// for a contended miss, on what bounds it: contendedFloors), writes it
// all to docs/profiles.json and renders from it the profile block of
// docs/benchmarks.md. It is skipped unless DLOCK_PROFILE_UPDATE=1.
func TestRegenerateProfiles(t *testing.T) {
	if os.Getenv(envProfile) != "1" {
		t.Skipf("set %s=1 (or run make bench-profile) to profile both sides and rewrite docs/profiles.json", envProfile)
	}
	r, err := benchreport.ReadResults(filepath.Join(root, benchreport.ResultsFile))
	if err != nil {
		t.Fatal(err)
	}
	missed, contended := map[string]bool{}, map[string]string{} // the latter: the baseline's best way of waiting
	for _, v := range r.Verdicts() {
		switch {
		case v.Met || v.Got == "":
		case strings.HasPrefix(v.What, "uncontended"):
			missed[v.Backend] = true
		case strings.HasPrefix(v.What, "contended"):
			contended[v.Backend] = bestWay(r.Comparisons, v.Backend)
		}
	}
	if len(missed) == 0 && len(contended) == 0 {
		t.Skip("every target is met: nothing to profile")
	}
	p := &benchreport.Profiles{Measured: time.Now().UTC().Format("2006-01-02"), Machine: baseline.Machine(),
		Goroutines: profileG, SecondsPerSide: profileFor.Seconds()}
	for _, u := range serverURLs(t, func(name string) bool {
		b := strings.ReplaceAll(name, " ", "-")
		return missed[b] || contended[b] != ""
	}) {
		b := profileBackend(t, u, missed[u.backend], contended[u.backend])
		if c := b.Contended; c != nil {
			t.Logf("%s, contended: dlock %.0f/s, %.0f µs a critical section; baseline (%s) %.0f/s, %.0f µs",
				u.backend, c.Dlock.CyclesPerSec, c.Dlock.CPUPerCycle(), c.BaselineWay, c.Baseline.CyclesPerSec, c.Baseline.CPUPerCycle())
		}
		for _, s := range []struct {
			name string
			sp   benchreport.SideProfile
		}{{"dlock", b.Dlock}, {"baseline", b.Baseline}} {
			t.Logf("%s, %s: %.0f cycles/s, %d failed, %.0f µs of client CPU a cycle, allocating %.0f%%, GC marking %.0f%%",
				u.backend, s.name, s.sp.CyclesPerSec, s.sp.Errors, s.sp.CPUPerCycle(), s.sp.AllocPct, s.sp.GCPct)
			for _, e := range s.sp.Top {
				t.Logf("    %5.1f%% %5.1f%%  %s", e.FlatPct, e.CumPct, e.Function)
			}
		}
		for _, f := range b.Floors {
			t.Logf("%s floor: %s, %s: %.0f %s %s", u.backend, f.Tool, f.What, f.PerSec, f.Unit, f.NotRun)
		}
		if b.NoFloor != "" {
			t.Logf("%s floor: %s", u.backend, b.NoFloor)
		}
		p.Backends = append(p.Backends, b)
	}
	if err := benchreport.WriteProfiles(filepath.Join(root, benchreport.ProfilesFile), p); err != nil {
		t.Fatal(err)
	}
	if err := docblock.Update(benchreport.ProfileBlocks(root, p)); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s and rendered %s from it", benchreport.ProfilesFile, benchreport.DocFile)
}

// profileBackend profiles both sides on u, uncontended when
// uncontended is set and contended when way (the baseline's way of
// waiting to profile) is not empty, then measures its floors.
func profileBackend(t *testing.T, u target, uncontended bool, way string) benchreport.BackendProfile {
	ctx := context.Background()
	tg, err := baseline.Open(ctx, u.url, 10*time.Second)
	if err != nil {
		t.Fatalf("%s: %v", u.name, err)
	}
	defer tg.Close()
	b := benchreport.BackendProfile{Backend: u.backend}
	if uncontended {
		b.Dlock = profileSide(t, u, &tg.Dlock, "dlock")
		b.Baseline = profileSide(t, u, &tg.Base, "base")
	}
	if way != "" {
		b.Contended = profileContended(t, u, tg, way)
	}
	b.Floors, b.NoFloor = floors(t, u)
	if way != "" {
		b.Floors = append(b.Floors, contendedFloors(t, u)...)
	}
	return b
}

// bestWay is the name of the baseline's best way of waiting in backend's
// contended comparison.
func bestWay(cs []baseline.Comparison, backend string) string {
	for _, c := range cs {
		if c.Backend == backend && c.Contended {
			return c.BaselineImpl
		}
	}
	return ""
}

// profileContended runs the contended workload under the CPU profiler,
// each side alone: dlock's first way of contending (a Locker per
// worker) and the baseline's way named way, each set up and warmed as a
// comparison's round is, and torn down after.
func profileContended(t *testing.T, u target, tg *baseline.Target, way string) *benchreport.ContendedProfile {
	w := baseline.Workloads[len(baseline.Workloads)-1]
	if !w.Contended {
		t.Fatalf("the last workload, %s, is not the contended one", w.Name)
	}
	c := &benchreport.ContendedProfile{Workers: w.Goroutines, Seconds: profileFor.Seconds(), BaselineWay: way}
	var base *baseline.Contender
	for i, ct := range tg.Base.Contenders {
		if ct.Name == way {
			base = &tg.Base.Contenders[i]
		}
	}
	if base == nil {
		t.Fatalf("%s: the baseline has no way of waiting named %q", u.name, way)
	}
	c.Dlock = profileContender(t, u, w, tg.Dlock.Contenders[0], "dlock")
	c.Baseline = profileContender(t, u, w, *base, "base")
	return c
}

// profileContender runs ct's workers for profileFor under the profiler.
func profileContender(t *testing.T, u target, w baseline.Workload, ct baseline.Contender, side string) benchreport.SideProfile {
	ctx := context.Background()
	lock, teardown, err := baseline.SetUpContenders(ctx, ct, w, "profile/contended/"+side)
	if err != nil {
		t.Fatalf("%s, %s: %v", u.name, side, err)
	}
	defer teardown()
	var r *benchwork.Contention
	sp := underProfiler(t, u.name+", contended "+side, func() { r = baseline.RunContended(ctx, w, lock, benchwork.For(profileFor)) })
	if r.Err != nil {
		t.Logf("%s, contended %s: first failure: %v", u.name, side, r.Err)
	}
	sp.Cycles, sp.Errors = r.N, r.Failed
	sp.CyclesPerSec = float64(r.N) / r.Elapsed.Seconds()
	return sp
}

// profileSide warms s's pooled connections, then runs its uncontended
// cycle under the CPU profiler.
func profileSide(t *testing.T, u target, s *baseline.Side, side string) benchreport.SideProfile {
	ctx := context.Background()
	prefix := "profile/" + side + "/"
	benchwork.RunCycles(ctx, benchwork.Count(4*profileG), profileG, prefix+"warm/", s.Cycle, benchwork.GoOn)
	var c benchwork.Cycles
	sp := underProfiler(t, u.name+", "+side, func() {
		c = benchwork.RunCycles(ctx, benchwork.For(profileFor), profileG, prefix, s.Cycle, benchwork.GoOn)
	})
	if c.Err != nil {
		t.Logf("%s, %s: first failure: %v", u.name, side, c.Err)
	}
	sp.Cycles, sp.Errors = c.N-c.Failed, c.Failed
	sp.CyclesPerSec = float64(sp.Cycles) / c.Elapsed.Seconds()
	return sp
}

// underProfiler runs run under Go's CPU profiler and summarizes the
// profile; what names the run in a failure.
func underProfiler(t *testing.T, what string, run func()) benchreport.SideProfile {
	var buf bytes.Buffer
	if err := pprof.StartCPUProfile(&buf); err != nil {
		t.Fatal(err)
	}
	run()
	pprof.StopCPUProfile()
	prof, err := profile.Parse(&buf)
	if err != nil {
		t.Fatalf("%s: parse the CPU profile: %v", what, err)
	}
	sp, err := benchreport.Summarize(prof, benchreport.ProfileTop)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return sp
}

// floors runs u's standard load tools against its server; etcd has none.
func floors(t *testing.T, u target) ([]benchreport.Floor, string) {
	pu, err := url.Parse(u.url)
	if err != nil {
		t.Fatalf("%s: %v", u.name, err)
	}
	switch u.backend {
	case "redis":
		return redisFloors(t, pu), ""
	case "postgres-advisory":
		return []benchreport.Floor{pgbenchFloor(t, pu, "pg_try_advisory_lock + pg_advisory_unlock, k random a transaction",
			`\set k random(1, 1000000000)
SELECT pg_try_advisory_lock(:k);
SELECT pg_advisory_unlock(:k);
`)}, ""
	case "postgres-lease":
		// The baseline's own upsert and DELETE (its table and sequence
		// exist: baseline.Open made them).
		return []benchreport.Floor{pgbenchFloor(t, pu, "the baseline's upsert lease + token-checked DELETE, name random a transaction",
			`\set k random(1, 1000000000)
INSERT INTO dlock_bench_lease AS l (name, token, fence, expires_at) VALUES ('pgbench/' || :k, 'token' || :client_id, nextval('dlock_bench_fence'), now() + 10000 * interval '1 millisecond') ON CONFLICT (name) DO UPDATE SET token = excluded.token, fence = excluded.fence, expires_at = excluded.expires_at WHERE l.expires_at < now() RETURNING fence;
DELETE FROM dlock_bench_lease WHERE name = 'pgbench/' || :k AND token = 'token' || :client_id;
`)}, ""
	case "mysql-get_lock":
		return []benchreport.Floor{mysqlslapFloor(t, pu, 150000, "GET_LOCK(name, 0) + RELEASE_LOCK, a name per connection",
			"SELECT GET_LOCK(CONCAT('mysqlslap/', CONNECTION_ID()), 0);SELECT RELEASE_LOCK(CONCAT('mysqlslap/', CONNECTION_ID()))")}, ""
	case "mysql-lease":
		return []benchreport.Floor{mysqlslapFloor(t, pu, 50000, "the baseline's upsert lease + token-checked DELETE, a name per connection",
			"INSERT INTO dlock_bench_lease (name, token, fence, expires_at) VALUES (CONCAT('mysqlslap/', CONNECTION_ID()), 'token', "+
				"LAST_INSERT_ID(NEXTVAL(dlock_bench_fence)), UTC_TIMESTAMP(6) + INTERVAL 10000000 MICROSECOND) ON DUPLICATE KEY UPDATE "+
				"token = IF(expires_at < UTC_TIMESTAMP(6), VALUES(token), token), fence = IF(expires_at < UTC_TIMESTAMP(6), VALUES(fence), fence), "+
				"expires_at = IF(expires_at < UTC_TIMESTAMP(6), VALUES(expires_at), expires_at);"+
				"DELETE FROM dlock_bench_lease WHERE name = CONCAT('mysqlslap/', CONNECTION_ID()) AND token = 'token'")}, ""
	case "etcd":
		return nil, "etcd has no packaged load tool (its benchmark tool is not in the Debian packages); no floor"
	}
	return nil, "no load tool for this backend"
}

// contendedFloors runs, where u's backend misses a contended target, the
// load tool on what bounds its contended workload: Postgres advisory, 16
// pgbench clients taking one key with the blocking pg_advisory_lock and
// pausing 1 ms after the unlock (the baseline's way, with no client
// code); Postgres lease mode, the NOTIFY a hand-off sends, from one
// client, with no other connection listening and with 16 idle
// connections LISTENing on channels of their own, as 16 Lockers' do:
// PostgreSQL 15 wakes every listening backend of the database at each
// NOTIFY, whatever its channel.
func contendedFloors(t *testing.T, u target) []benchreport.Floor {
	pu, err := url.Parse(u.url)
	if err != nil {
		t.Fatalf("%s: %v", u.name, err)
	}
	switch u.backend {
	case "postgres-advisory":
		return []benchreport.Floor{pgbenchFloor(t, pu, "contended: pg_advisory_lock + pg_advisory_unlock of one key, a 1 ms pause after",
			"SELECT pg_advisory_lock(7340033);\nSELECT pg_advisory_unlock(7340033);\n\\sleep 1 ms\n")}
	case "postgres-lease":
		notify := "SELECT pg_notify('dlock_floor_nobody', 'p 1 1 1');\n"
		alone := pgbenchRun(t, pu, 1, 1, "1 client, a NOTIFY a transaction on a channel nobody listens to, no connection LISTENing",
			"notifications/s", notify)
		stop := listeners(t, pu, 16)
		beside := pgbenchRun(t, pu, 1, 1, "the same beside 16 idle connections LISTENing on channels of their own",
			"notifications/s", notify)
		stop()
		return []benchreport.Floor{alone, beside}
	}
	return nil
}

// listeners opens n connections to u's database, each LISTENing on a
// channel of its own and otherwise idle, and returns what closes them.
func listeners(t *testing.T, u *url.URL, n int) func() {
	ctx := context.Background()
	// u's own query holds dlock's settings, which pgx would send the
	// server as run-time parameters.
	dsn := (&url.URL{Scheme: "postgres", User: u.User, Host: u.Host, Path: u.Path, RawQuery: "sslmode=disable"}).String()
	var conns []*pgx.Conn
	stop := func() {
		for _, c := range conns {
			_ = c.Close(ctx)
		}
	}
	for i := range n {
		c, err := pgx.Connect(ctx, dsn)
		if err == nil {
			conns = append(conns, c)
			_, err = c.Exec(ctx, fmt.Sprintf("LISTEN dlock_floor_idle_%d", i))
		}
		if err != nil {
			stop()
			t.Fatalf("listener %d: %v", i, err)
		}
	}
	return stop
}

// installed is "" when the tool at path exists, else why it cannot run.
func installed(path string) string {
	if _, err := os.Stat(path); err != nil {
		return "not installed"
	}
	return ""
}

// runTool runs a load tool and returns its stdout; the error carries its
// stderr's last line.
func runTool(t *testing.T, name string, args ...string) (string, error) {
	t.Logf("%s %s", name, strings.Join(args, " "))
	var stderr bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
			msg = msg[i+1:]
		}
		return string(out), fmt.Errorf("%s: %v: %s", filepath.Base(name), err, msg)
	}
	return string(out), nil
}

// redisFloors: redis-benchmark, 16 clients, the baseline's acquire
// script's SET NX PX (by EVAL) on random keys, without pipelining and
// with 16 commands in flight on each connection.
func redisFloors(t *testing.T, u *url.URL) []benchreport.Floor {
	script := "if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end return 0"
	var fs []benchreport.Floor
	for _, run := range []struct {
		what string
		n    string
		p    string
	}{
		{"16 clients, EVAL of a one-line SET NX PX script on random keys", "150000", "1"},
		{"the same with -P 16 (16 commands in flight a connection)", "1500000", "16"},
	} {
		f := benchreport.Floor{Tool: "redis-benchmark", What: run.what, Unit: "requests/s"}
		if f.NotRun = installed(redisBenchmark); f.NotRun == "" {
			out, err := runTool(t, redisBenchmark, "-h", u.Hostname(), "-p", u.Port(), "-c", "16", "-n", run.n, "-P", run.p,
				"-r", "1000000", "--csv", "EVAL", script, "1", "floor:__rand_int__", "token", "1000")
			f.PerSec, err = parseRedisBenchmark(out, err)
			if err != nil {
				f.NotRun = "failed: " + err.Error()
			}
		}
		fs = append(fs, f)
	}
	return fs
}

// parseRedisBenchmark reads the rate from redis-benchmark's --csv
// output: a header line, then a line per test whose second field is its
// requests per second (the first, the command, may hold commas).
func parseRedisBenchmark(out string, err error) (float64, error) {
	if err != nil {
		return 0, err
	}
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil {
		return 0, fmt.Errorf("redis-benchmark's output %q: %v", out, err)
	}
	for _, rec := range recs {
		if len(rec) < 2 || rec[1] == "rps" {
			continue
		}
		if v, err := strconv.ParseFloat(rec[1], 64); err == nil && v > 0 {
			return v, nil
		}
	}
	return 0, fmt.Errorf("no rate in redis-benchmark's output %q", out)
}

// pgbenchFloor: pgbench, 16 clients on 2 threads for 3 s, prepared
// statements, the script a transaction.
func pgbenchFloor(t *testing.T, u *url.URL, what, script string) benchreport.Floor {
	return pgbenchRun(t, u, 16, 2, "16 clients, -j 2, "+what, "transactions/s", script)
}

// pgbenchRun: pgbench, clients on jobs threads for 3 s, prepared
// statements, the script a transaction, its rate counted in unit.
func pgbenchRun(t *testing.T, u *url.URL, clients, jobs int, what, unit, script string) benchreport.Floor {
	f := benchreport.Floor{Tool: "pgbench", What: what, Unit: unit}
	if f.NotRun = installed(pgbench); f.NotRun != "" {
		return f
	}
	file := filepath.Join(t.TempDir(), "floor.sql")
	if err := os.WriteFile(file, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := runTool(t, pgbench, "-n", "-c", strconv.Itoa(clients), "-j", strconv.Itoa(jobs), "-T", "3", "-M", "prepared", "-f", file,
		"-h", u.Hostname(), "-p", u.Port(), "-U", u.User.Username(), strings.TrimPrefix(u.Path, "/"))
	if err == nil {
		f.PerSec, err = parsePgbench(out)
	}
	if err != nil {
		f.NotRun = "failed: " + err.Error()
	}
	return f
}

var pgbenchTPS = regexp.MustCompile(`(?m)^tps = ([0-9.]+)`)

// parsePgbench reads the rate from pgbench's "tps = N (...)" line.
func parsePgbench(out string) (float64, error) {
	m := pgbenchTPS.FindStringSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("no tps line in pgbench's output %q", out)
	}
	return strconv.ParseFloat(m[1], 64)
}

// mysqlslapFloor: mysqlslap, 16 clients, statements of the
// two-statement query in all (statements/2 cycles); the rate is cycles
// over its time to run them.
func mysqlslapFloor(t *testing.T, u *url.URL, statements int, what, query string) benchreport.Floor {
	f := benchreport.Floor{Tool: "mysqlslap", What: "16 clients, " + what, Unit: "cycles/s"}
	if f.NotRun = installed(mysqlslap); f.NotRun != "" {
		return f
	}
	out, err := runTool(t, mysqlslap, "--host", u.Hostname(), "--port", u.Port(), "--user", u.User.Username(),
		"--protocol", "tcp", "--create-schema", strings.TrimPrefix(u.Path, "/"), "--no-drop", "--concurrency", "16", "--iterations", "1",
		"--number-of-queries", strconv.Itoa(statements), "--delimiter", ";", "--query", query)
	var secs float64
	if err == nil {
		secs, err = parseMysqlslap(out)
	}
	if err != nil {
		f.NotRun = "failed: " + err.Error()
		return f
	}
	f.PerSec = float64(statements) / 2 / secs
	return f
}

var mysqlslapSeconds = regexp.MustCompile(`Average number of seconds to run all queries: ([0-9.]+) seconds`)

// parseMysqlslap reads the time mysqlslap took to run all its queries.
func parseMysqlslap(out string) (float64, error) {
	m := mysqlslapSeconds.FindStringSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("no run time in mysqlslap's output %q", out)
	}
	s, err := strconv.ParseFloat(m[1], 64)
	if err == nil && s <= 0 {
		err = errors.New("mysqlslap ran its queries in no time")
	}
	return s, err
}

// TestLoadToolOutputs: the rates are read from each tool's output as it
// prints them, and output without one is an error quoting it.
func TestLoadToolOutputs(t *testing.T) {
	csv := `"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
"EVAL if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end return 0 1 floor:__rand_int__ token 1000","95907.93","0.147","0.032","0.135","0.271","0.359","2.543"
`
	if v, err := parseRedisBenchmark(csv, nil); err != nil || v != 95907.93 {
		t.Errorf("redis-benchmark: %v, %v; want 95907.93", v, err)
	}
	if _, err := parseRedisBenchmark("", errors.New("redis-benchmark: exit status 1: Connection refused")); err == nil {
		t.Error("redis-benchmark's failure is lost")
	}
	if _, err := parseRedisBenchmark(`"test","rps"`+"\n", nil); err == nil || !strings.Contains(err.Error(), "no rate") {
		t.Errorf("redis-benchmark without a rate: %v", err)
	}
	pg := "transaction type: floor.sql\nnumber of transactions actually processed: 112377\n" +
		"latency average = 0.427 ms\ninitial connection time = 9.912 ms\ntps = 37459.123456 (without initial connection time)\n"
	if v, err := parsePgbench(pg); err != nil || v != 37459.123456 {
		t.Errorf("pgbench: %v, %v", v, err)
	}
	if _, err := parsePgbench("pgbench: error: connection refused"); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("pgbench without tps: %v", err)
	}
	slap := "Benchmark\n\tAverage number of seconds to run all queries: 2.940 seconds\n\tMinimum number of seconds to run all queries: 2.940 seconds\n"
	if v, err := parseMysqlslap(slap); err != nil || v != 2.94 {
		t.Errorf("mysqlslap: %v, %v", v, err)
	}
	if _, err := parseMysqlslap("Average number of seconds to run all queries: 0.000 seconds"); err == nil {
		t.Error("mysqlslap in no time: no error")
	}
}

// TestFloorsNotInstalled: a load tool that is not installed is recorded
// as such, its floor left empty, and nothing is run.
func TestFloorsNotInstalled(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "absent")
	for _, p := range []*string{&redisBenchmark, &pgbench, &mysqlslap} {
		old := *p
		*p = missing
		t.Cleanup(func() { *p = old })
	}
	u, _ := url.Parse("postgres://nobody@127.0.0.1:1/none")
	fs := append(redisFloors(t, u), pgbenchFloor(t, u, "a script", "SELECT 1;"), mysqlslapFloor(t, u, 2, "a query", "SELECT 1"))
	if len(fs) != 4 {
		t.Fatalf("%d floors, want 4: %+v", len(fs), fs)
	}
	for _, f := range fs {
		if f.NotRun != "not installed" || f.PerSec != 0 {
			t.Errorf("%s: %+v, want not installed", f.Tool, f)
		}
	}
}
