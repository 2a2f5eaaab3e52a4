package cli

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dlockdev/dlock/cmd/dlock/internal/jobguard"
	"github.com/dlockdev/dlock/internal/testing/testserver"
)

// dlockBin is the dlock binary built once for this test package.
var dlockBin string

// TestMain builds cmd/dlock once for the tests (testserver.RunWithCommand).
func TestMain(m *testing.M) {
	if jobguard.IsGuard() { // runRun in this process re-executes it as the guard
		os.Exit(jobguard.Main())
	}
	os.Exit(testserver.RunWithCommand(m, "github.com/dlockdev/dlock/cmd/dlock", &dlockBin))
}

// fileURL returns a fresh file:// backend URL in t's temp dir.
func fileURL(t testing.TB) string {
	return "file://" + filepath.Join(t.TempDir(), "locks.db")
}

// result is the outcome of one dlock invocation.
type result struct {
	stdout, stderr string
	code           int
}

// runBin runs the binary with args (DLOCK_URL unset unless env sets it) and
// waits up to five minutes.
func runBin(t testing.TB, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, dlockBin, args...)
	cmd.Env = append(withoutEnv(os.Environ(), "DLOCK_URL"), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String(), code: cmd.ProcessState.ExitCode()}
	if err != nil && r.code < 0 {
		t.Fatalf("dlock %v: %v", args, err)
	}
	return r
}

// startDlock starts the binary without waiting; the process is killed in
// t.Cleanup if still running.
func startDlock(t testing.TB, env []string, stdout, stderr *syncBuffer, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(dlockBin, args...)
	cmd.Env = append(withoutEnv(os.Environ(), "DLOCK_URL"), env...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return cmd
}

// waitFile waits until path exists and is non-empty, and returns its
// trimmed content.
func waitFile(t testing.TB, path string, timeout time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 && bytes.HasSuffix(b, []byte("\n")) {
			return strings.TrimSpace(string(b))
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear within %s", path, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// assertOneLine checks the failure contract: non-zero exit, exactly one
// line on stderr, no stack trace.
func assertOneLine(t testing.TB, r result, what string) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
	if r.code == 0 {
		t.Errorf("%s: exit 0, want non-zero", what)
	}
	if len(lines) != 1 || lines[0] == "" {
		t.Errorf("%s: stderr has %d lines, want 1:\n%s", what, len(lines), r.stderr)
	}
	for _, bad := range []string{"goroutine ", "panic", ".go:"} {
		if strings.Contains(r.stderr, bad) {
			t.Errorf("%s: stderr looks like a stack trace or log (%q):\n%s", what, bad, r.stderr)
		}
	}
}

// withoutEnv is env without key.
func withoutEnv(env []string, key string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, key+"=") {
			out = append(out, kv)
		}
	}
	return out
}
