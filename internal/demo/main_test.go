package demo

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// dlockBin is the dlock binary, built once for this test package: the
// demo starts its workers by re-executing it.
var dlockBin string

// TestMain builds cmd/dlock once, runs the tests, removes the binary and
// fails on leaked goroutines.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "dlock-demo-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	dlockBin = filepath.Join(dir, "dlock")
	out, err := exec.Command("go", "build", "-o", dlockBin, "github.com/dlockdev/dlock/cmd/dlock").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build dlock: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
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
