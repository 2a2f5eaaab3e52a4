package chaos

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/internal/testing/testserver"
)

// libfaketime is Debian's libfaketime (package libfaketime, which the
// faketime package brings): preloaded into a server, it shifts the
// server's wall clock by the offset written in a file, re-read on every
// call.
const libfaketime = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"

// serverClock makes every server started afterwards in this test run on a
// wall clock that jump can step (the monotonic clock is left alone).
// Without libfaketime the test is skipped, or fails under
// DLOCK_TEST_REQUIRE_SERVERS=1 (CI, where .ci/run installs it), as a
// missing server binary does.
//
// The client side's clock is stepped through dlock.WithClock instead
// (TestS10ClientClock).
func serverClock(t *testing.T) (jump func(offset time.Duration)) {
	t.Helper()
	requireLibfaketime(t, libfaketime)
	// Readable by the postgres user the server runs as (t.TempDir is 0700).
	dir, err := os.MkdirTemp("", "dlock-faketime-")
	if err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(dir, 0o755)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	file := filepath.Join(dir, "faketime")
	jump = func(offset time.Duration) {
		if err := os.WriteFile(file, fmt.Appendf(nil, "%+d\n", int64(offset.Seconds())), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	jump(0)
	t.Setenv("LD_PRELOAD", libfaketime)
	t.Setenv("FAKETIME_TIMESTAMP_FILE", file)
	t.Setenv("FAKETIME_NO_CACHE", "1")
	t.Setenv("DONT_FAKE_MONOTONIC", "1")
	return jump
}

// requireLibfaketime skips t when the library at path is missing, or
// fails it under DLOCK_TEST_REQUIRE_SERVERS=1.
func requireLibfaketime(t testing.TB, path string) {
	t.Helper()
	_, err := os.Stat(path)
	switch {
	case err == nil:
	case os.Getenv(testserver.EnvRequire) == "1":
		t.Fatalf("libfaketime missing and %s=1: %v (apt-get install faketime)", testserver.EnvRequire, err)
	default:
		t.Skipf("libfaketime missing: %v (apt-get install faketime)", err)
	}
}

// TestS10ServerClockJumps steps the wall clock of a PostgreSQL server,
// whose clock decides lease expiry in lease mode (expires_at against
// now()). Forward, mid-hold: the lease expires early on the server and a
// second holder is granted while the first still believes (the negative
// control: dlock assumes the server's clock runs at about the right rate,
// as the package docs say); the second grant's fence must still be
// higher, because Postgres fences are a counter, not a clock, so a fenced
// resource stays safe.
//
// Redis and etcd are not covered: Debian's redis-server (jemalloc) aborts
// under libfaketime ("unexpected recursive calls to clock_gettime"), and
// etcd is a static Go binary that LD_PRELOAD cannot reach.
func TestS10ServerClockJumps(t *testing.T) {
	jump := serverClock(t)
	srv := testserver.NewPostgres(t)
	b := pgBackend(t, srv, "lease")
	b.Name = "postgres (lease), libfaketime"
	double := Row{Scenario: "S10 server clock steps forward 5s mid-hold, control: second holder while the first believes",
		Backend: b.Name, Expect: ExpectViolation, Metric: "jump→second grant"}
	fences := Row{Scenario: "S10 server clock steps forward 5s mid-hold: second grant's fence not above", Backend: b.Name,
		Expect: ExpectSafe, Unlinearizable: -1}
	a := openLocker(t, b, dlock.WithTTL(b.TTL))
	next := openLocker(t, b, dlock.WithTTL(b.TTL))
	offset := time.Duration(0)
	// The control is a race: the next holder must be granted before the
	// first holder's next refresh (a third of a TTL away) is refused and
	// tells it. Like S6's, it may run controlRetries more trials until it
	// reproduces once.
	n := trials(1)
	for i := 0; i < n || (double.Violations == 0 && i < n+controlRetries); i++ {
		offset += 5 * time.Second // only forward: every trial steps further
		var jumped time.Time
		step := func() { jumped = time.Now(); jump(offset) }
		r := holdThroughFault(t, a, next, lockName("s10", i), step, 3*b.TTL, dlock.WithWait(5*time.Second))
		for _, row := range []*Row{&double, &fences} {
			row.Trials++
		}
		if r.overlap {
			double.Violations++
		}
		if r.lin != nil {
			double.Unlinearizable++
			t.Logf("trial %d: %v", i, r.lin)
		}
		if r.fenceBack {
			fences.Violations++
		}
		double.Timings = append(double.Timings, r.faulted.Add(r.next).Sub(jumped))
	}
	report(t, double)
	report(t, fences)
}

// tbRecorder records what requireLibfaketime does to a test.
type tbRecorder struct {
	testing.TB
	failed, skipped string
}

func (r *tbRecorder) Helper()                      {}
func (r *tbRecorder) Fatalf(f string, args ...any) { r.failed = fmt.Sprintf(f, args...) }
func (r *tbRecorder) Skipf(f string, args ...any)  { r.skipped = fmt.Sprintf(f, args...) }

// TestLibfaketimeRequiredInCI: under DLOCK_TEST_REQUIRE_SERVERS=1 a
// missing libfaketime fails the server clock rows instead of skipping
// them; otherwise it skips them.
func TestLibfaketimeRequiredInCI(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "libfaketime.so.1")
	for _, require := range []string{"1", ""} {
		t.Setenv(testserver.EnvRequire, require)
		var r tbRecorder
		requireLibfaketime(&r, missing)
		switch {
		case require == "1" && r.failed == "":
			t.Errorf("%s=1: missing libfaketime did not fail the test (skipped: %q)", testserver.EnvRequire, r.skipped)
		case require == "" && r.skipped == "":
			t.Errorf("missing libfaketime outside CI did not skip the test (failed: %q)", r.failed)
		}
		t.Logf("%s=%q: failed %q, skipped %q", testserver.EnvRequire, require, r.failed, r.skipped)
	}
}
