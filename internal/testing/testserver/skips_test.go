package testserver_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dlockdev/dlock/internal/testing/testserver"
)

// TestMissingBinaryIsRecorded: with no server binary on PATH, a test that
// starts a server skips, the skip is recorded in the DLOCK_TEST_SKIPS file
// with the missing binary's name, and the summary names it and the command
// that installs it.
func TestMissingBinaryIsRecorded(t *testing.T) {
	skips := filepath.Join(t.TempDir(), "skips")
	t.Setenv("PATH", t.TempDir()) // an empty directory: no redis-server, no etcd
	t.Setenv(testserver.EnvRequire, "")
	t.Setenv(testserver.EnvSkips, skips)
	skipped := map[string]bool{}
	for name, start := range map[string]func(testing.TB){
		"redis": func(tb testing.TB) { testserver.Redis(tb) },
		"etcd":  func(tb testing.TB) { testserver.Etcd(tb) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() { skipped[name] = t.Skipped() }()
			start(t)
			t.Fatal("a server started with an empty PATH")
		})
	}
	if !skipped["redis"] || !skipped["etcd"] {
		t.Fatalf("skipped = %v, want both", skipped)
	}
	rec, err := os.ReadFile(skips)
	if err != nil {
		t.Fatalf("no record of the skips: %v", err)
	}
	for _, want := range []string{"redis-server\ttestserver\tTestMissingBinaryIsRecorded/redis\n",
		"etcd\ttestserver\tTestMissingBinaryIsRecorded/etcd\n"} {
		if !strings.Contains(string(rec), want) {
			t.Errorf("the record lacks %q:\n%s", want, rec)
		}
	}
	var sum strings.Builder
	if err := testserver.Summary(&sum, skips); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"NOT TESTED", "redis-server missing: 1 test skipped in testserver",
		"etcd missing: 1 test skipped in testserver", testserver.InstallCommand} {
		if !strings.Contains(sum.String(), want) {
			t.Errorf("the summary lacks %q:\n%s", want, sum.String())
		}
	}
	t.Logf("summary:\n%s", sum.String())
}

// TestSummaryOfNoSkips: a run that skipped nothing (the file is empty or
// was never written) prints nothing.
func TestSummaryOfNoSkips(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "skips")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{empty, filepath.Join(t.TempDir(), "never-written")} {
		var sum strings.Builder
		if err := testserver.Summary(&sum, f); err != nil || sum.Len() != 0 {
			t.Errorf("Summary(%s) = %q, %v; want nothing", f, sum.String(), err)
		}
	}
}

// TestSummaryCountsEachTestOnce: the same test recorded twice (a package
// run twice) counts once; tests are grouped per missing binary, and the
// packages listed once each, sorted.
func TestSummaryCountsEachTestOnce(t *testing.T) {
	f := filepath.Join(t.TempDir(), "skips")
	rec := "redis-server\tredislock\tTestA\nredis-server\tredislock\tTestA\nredis-server\tfence\tTestB\n" +
		"java\tzklock\tTestC\n"
	if err := os.WriteFile(f, []byte(rec), 0o644); err != nil {
		t.Fatal(err)
	}
	var sum strings.Builder
	if err := testserver.Summary(&sum, f); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"java missing: 1 test skipped in zklock\n", "redis-server missing: 2 tests skipped in fence, redislock\n"} {
		if !strings.Contains(sum.String(), want) {
			t.Errorf("the summary lacks %q:\n%s", want, sum.String())
		}
	}
}
