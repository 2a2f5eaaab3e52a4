package cli

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dlockdev/dlock/internal/testing/testserver"
)

// TestRunForceReleasedExitsWithinGrace: on every backend
// that pushes a force-release to its holder (Redis pub/sub, Postgres
// NOTIFY in both modes, an etcd watch), `dlock run --ttl 60s` learns of
// `dlock release --force` at once, not at its next refresh (20 s away),
// says it was force-released, stops its command and exits 76 within the
// grace period. The time from the release's return to the exit is logged
// per backend: it is the figure the README quotes.
func TestRunForceReleasedExitsWithinGrace(t *testing.T) {
	const grace = time.Second
	backends := []struct {
		name string
		url  func(t *testing.T) string
	}{
		{"redis", func(t *testing.T) string { return testserver.Redis(t).URL() }},
		{"postgres lease", func(t *testing.T) string { return testserver.Postgres(t).NewDatabase(t) }},
		{"postgres advisory", func(t *testing.T) string { return testserver.Postgres(t).NewDatabase(t) + "&mode=advisory" }},
		{"etcd", func(t *testing.T) string { return testserver.Etcd(t).URL() }},
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			url := b.url(t)
			if r := runBin(t, nil, "--url", url, "migrate"); r.code != 0 {
				t.Fatalf("migrate: %d %s", r.code, r.stderr)
			}
			env := []string{"DLOCK_URL=" + url}
			dir := t.TempDir()
			var out, errb syncBuffer
			holder := startDlock(t, env, &out, &errb, "run", "--ttl", "60s", "--grace", grace.String(), "evicted", "--",
				"sh", "-c", "echo $DLOCK_FENCE > "+dir+"/fence; sleep 100")
			waitFile(t, dir+"/fence", 30*time.Second)
			time.Sleep(200 * time.Millisecond) // past pglock's publication of its holder (watchDelay)

			r := runBin(t, env, "release", "--force", "evicted")
			if r.code != 0 {
				t.Fatalf("release --force: exit %d: %s", r.code, r.stderr)
			}
			released := time.Now()
			waited := make(chan struct{})
			go func() { _ = holder.Wait(); close(waited) }()
			select {
			case <-waited:
			case <-time.After(15 * time.Second): // well before the refresh at 20 s
				_ = holder.Process.Signal(syscall.SIGKILL)
				<-waited
				t.Fatalf("dlock run still running 15 s after the force-release: not pushed; stderr %s", errb.String())
			}
			took := time.Since(released)
			t.Logf("%s: force-release → dlock run exited in %v (grace %v)", b.name, took.Round(time.Millisecond), grace)
			if code := holder.ProcessState.ExitCode(); code != ExitLeaseLost {
				t.Errorf("exit %d, want %d; stderr %s", code, ExitLeaseLost, errb.String())
			}
			if !strings.Contains(errb.String(), "force-released") {
				t.Errorf("stderr does not say force-released: %s", errb.String())
			}
			// The command stops on SIGTERM at once (sleep), so the exit
			// comes well within the grace period after the push.
			if took > grace+2*time.Second {
				t.Errorf("exited %v after the force-release, want within the grace (%v) and the push", took, grace)
			}
		})
	}
}
