package demo

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/dlockdev/dlock/internal/testing/testserver"
)

// dlockBin is the dlock binary, built once for this test package: the
// demo starts its workers by re-executing it.
var dlockBin string

// TestMain builds cmd/dlock once for the tests (testserver.RunWithCommand).
func TestMain(m *testing.M) {
	os.Exit(testserver.RunWithCommand(m, "github.com/dlockdev/dlock/cmd/dlock", &dlockBin))
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
