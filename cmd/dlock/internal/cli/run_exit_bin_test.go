package cli

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestExitCodeTable runs the binary through every kind of outcome: usage
// errors exit 2, a command not found 127, one that cannot be executed 126,
// the command's own status passes through, and bare `dlock` prints help
// and exits 2.
func TestExitCodeTable(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "not-executable.sh")
	if err := os.WriteFile(plain, []byte("#!/bin/sh\necho hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"DLOCK_URL=" + fileURL(t)}
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stderr string // a substring of the one-line message
	}{
		{"no arguments", nil, ExitUsage, "Usage:"},
		{"ttl 0", []string{"run", "--ttl", "0", "k", "--", "true"}, ExitUsage, "--ttl 0s"},
		{"ttl without unit", []string{"run", "--ttl", "5", "k", "--", "true"}, ExitUsage, "missing unit"},
		{"ttl below the minimum", []string{"run", "--ttl", "1ms", "k", "--", "true"}, ExitUsage, "ttl 1ms"},
		{"negative grace", []string{"run", "--grace", "-1s", "k", "--", "true"}, ExitUsage, "--grace"},
		{"bad wait", []string{"run", "--wait", "never", "k", "--", "true"}, ExitUsage, "forever"},
		{"conflict code out of range", []string{"run", "--conflict-exit-code", "256", "k", "--", "true"}, ExitUsage, "0..255"},
		{"empty name", []string{"run", "", "--", "true"}, ExitUsage, "empty"},
		{"control character in name", []string{"run", "a\nb", "--", "true"}, ExitUsage, "printable"},
		{"bad flag", []string{"run", "--bogus", "k", "--", "true"}, ExitUsage, "unknown flag"},
		{"no command", []string{"run", "k"}, ExitUsage, "no command"},
		{"inspect empty name", []string{"inspect", ""}, ExitUsage, "empty"},
		{"release empty name", []string{"release", "--force", ""}, ExitUsage, "empty"},
		{"command not found", []string{"run", "k", "--", "no-such-command-dlock-test"}, ExitNotFound, "command not found: no-such-command-dlock-test"},
		{"path not found", []string{"run", "k", "--", filepath.Join(dir, "missing")}, ExitNotFound, "command not found"},
		{"not executable", []string{"run", "k", "--", plain}, ExitCannotExecute, "permission denied"},
		{"a directory", []string{"run", "k", "--", dir}, ExitCannotExecute, "cannot execute"},
		{"command's own status", []string{"run", "k", "--", "sh", "-c", "exit 3"}, 3, ""},
		{"command's 127 is its own", []string{"run", "k", "--", "sh", "-c", "exit 127"}, 127, ""},
		{"wait forever accepted", []string{"run", "--wait", "forever", "k", "--", "true"}, 0, ""},
		{"success", []string{"run", "k", "--", "true"}, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runBin(t, env, tc.args...)
			if r.code != tc.code {
				t.Errorf("exit %d, want %d; stderr %q", r.code, tc.code, r.stderr)
			}
			if tc.stderr == "" {
				if r.stderr != "" {
					t.Errorf("stderr %q, want nothing", r.stderr)
				}
				return
			}
			if !strings.Contains(r.stderr, tc.stderr) {
				t.Errorf("stderr %q lacks %q", r.stderr, tc.stderr)
			}
			if tc.args != nil {
				assertOneLine(t, r, tc.name)
			}
		})
	}
}

// TestRunInterruptedWhileWaiting: SIGINT during --wait gives up the wait,
// names the signal plainly and exits 130.
func TestRunInterruptedWhileWaiting(t *testing.T) {
	env := []string{"DLOCK_URL=" + fileURL(t)}
	dir := t.TempDir()
	var out1, err1, out2, err2 syncBuffer
	startDlock(t, env, &out1, &err1, "run", "k", "--", "sh", "-c", "echo x > "+dir+"/held; sleep 60")
	waitFile(t, dir+"/held", 30*time.Second)
	w := startDlock(t, env, &out2, &err2, "run", "--wait", "forever", "k", "--", "true")
	time.Sleep(time.Second) // let it install its handlers and reach the wait
	_ = w.Process.Signal(syscall.SIGINT)
	_ = w.Wait()
	if code := w.ProcessState.ExitCode(); code != 128+int(syscall.SIGINT) {
		t.Errorf("exit %d, want %d; stderr %q", code, 128+int(syscall.SIGINT), err2.String())
	}
	if want := `interrupted by SIGINT while waiting for "k"`; !strings.Contains(err2.String(), want) {
		t.Errorf("stderr %q lacks %q", err2.String(), want)
	}
}
