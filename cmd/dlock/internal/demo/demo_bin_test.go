package demo

import (
	"strings"
	"testing"

	"github.com/dlockdev/dlock/internal/testing/testserver"
)

// demoFlags keep the watchdog scenario short enough for CI.
var demoFlags = []string{"--watchdog-job", "2s", "--watchdog-ttl", "1s"}

// checkDemo runs `dlock demo args...` and checks that every scenario run
// showed the outcome it teaches; it returns the timeline.
func checkDemo(t *testing.T, want int, args ...string) string {
	t.Helper()
	r := runBin(t, nil, append(append([]string{"demo"}, args...), demoFlags...)...)
	verdicts := strings.Count(r.stdout, "\nverdict: ")
	if r.code != 0 || verdicts != want || strings.Contains(r.stdout, "verdict: UNEXPECTED") || strings.Contains(r.stdout, "verdict: ERROR") {
		t.Fatalf("dlock demo %v: exit %d, %d verdicts (want %d)\nstdout:\n%s\nstderr:\n%s", args, r.code, verdicts, want, r.stdout, r.stderr)
	}
	return r.stdout
}

// TestDemoTour: `dlock demo` with no argument runs correct, pause, fencing
// on the embedded default (a temporary file) and exits 0.
func TestDemoTour(t *testing.T) {
	checkDemo(t, len(tour))
}

// TestDemoScenarios: every other scenario exits 0 on the file backend.
func TestDemoScenarios(t *testing.T) {
	for _, s := range scenarios {
		if strings.Contains(strings.Join(tour, " "), s.name) {
			continue
		}
		t.Run(s.name, func(t *testing.T) {
			out := checkDemo(t, 1, s.name)
			if s.name == "billing" {
				checkBillingTimeline(t, out)
			}
			checkVerdictSays(t, out, verdictSays[s.name]...)
		})
	}
}

// verdictSays is what a scenario's verdict must say, beyond its success.
var verdictSays = map[string][]string{
	"election":  {"naive: two leaders wrote — B (term ", "fenced by term: A's write (term ", "was rejected"},
	"semaphore": {"came back", "D took it with fence"},
}

// checkVerdictSays fails unless out's verdict line contains every want.
func checkVerdictSays(t *testing.T, out string, wants ...string) {
	t.Helper()
	_, verdict, _ := strings.Cut(out, "\nverdict: ")
	for _, w := range wants {
		if !strings.Contains(verdict, w) {
			t.Errorf("verdict lacks %q:\n%s", w, out)
		}
	}
}

// checkBillingTimeline: in the fixed run, the paused holder A charges
// nothing after it resumes, and the timeline must not read otherwise
// (its charges from before the pause are reported before the pause).
func checkBillingTimeline(t *testing.T, out string) {
	t.Helper()
	i := strings.Index(out, "fixed:")
	j := strings.LastIndex(out, "A    resumed")
	if i < 0 || j < i {
		t.Fatalf("no fixed run with a resumed holder A in the timeline:\n%s", out)
	}
	after := out[j:]
	for _, line := range strings.Split(after, "\n") {
		if strings.Contains(line, " A ") && strings.Contains(line, "charged [") && !strings.Contains(line, "charged []") {
			t.Errorf("the timeline credits charges to the resumed stale holder:\n%s", out)
		}
	}
}

// checkDemoOn runs the demo on the server at url: in make test the tour
// and stale-release (the naive lock, which each backend writes in its
// own way, freed by a plain delete); every scenario in make test-long
// (testserver.LongRun), as on the file backend in TestDemoScenarios.
func checkDemoOn(t *testing.T, url string) {
	t.Helper()
	if testserver.LongRun() {
		checkDemo(t, len(scenarios), "all", "--url", url)
		return
	}
	checkDemo(t, len(tour), "--url", url)
	checkDemo(t, 1, "stale-release", "--url", url)
}

// TestDemoRedis: the demo exits 0 on a real Redis (checkDemoOn).
func TestDemoRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("long: the demo on Redis")
	}
	srv := testserver.Redis(t)
	checkDemoOn(t, srv.URL())
}

// TestDemoPostgres: the demo exits 0 on a real PostgreSQL (checkDemoOn;
// singleton with advisory locks).
func TestDemoPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("long: the demo on Postgres")
	}
	srv := testserver.Postgres(t)
	checkDemoOn(t, srv.NewDatabase(t))
}

// TestDemoRefusesMem: the in-process backend cannot host a multi-process
// demo; one line and a usage exit.
func TestDemoRefusesMem(t *testing.T) {
	r := runBin(t, nil, "demo", "--url", "mem://x")
	assertOneLine(t, r, "demo on mem://")
}

// TestDemoZooKeeper: the demo exits 0 on a real ZooKeeper (checkDemoOn;
// the naive locks as plain znodes).
func TestDemoZooKeeper(t *testing.T) {
	if testing.Short() {
		t.Skip("long: the demo on ZooKeeper")
	}
	srv := testserver.ZooKeeper(t)
	// The lease is the session: a short session timeout keeps the pauses
	// and the crash recovery as short as on the TTL backends.
	checkDemoOn(t, srv.URL()+"?session_timeout=1500ms")
}
