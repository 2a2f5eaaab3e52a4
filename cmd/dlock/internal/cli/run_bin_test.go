package cli

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRunTwoAtOnce: while one `dlock run` holds the lock, a second one
// exits 75 naming the holder without running its command; SIGTERM to the
// first is forwarded to its command, and the lock is free afterwards.
func TestRunTwoAtOnce(t *testing.T) {
	env := []string{"DLOCK_URL=" + fileURL(t)}
	dir := t.TempDir()
	var out1, err1 syncBuffer
	first := startDlock(t, env, &out1, &err1, "run", "--owner", "cron@host-a", "--ttl", "5s", "nightly", "--",
		"sh", "-c", "echo $DLOCK_FENCE > "+dir+"/fence; sleep 60")
	fence := waitFile(t, dir+"/fence", 30*time.Second)

	r := runBin(t, env, "run", "nightly", "--", "touch", dir+"/second-ran")
	if r.code != ExitHeld {
		t.Fatalf("second run: exit %d, want %d; stderr %s", r.code, ExitHeld, r.stderr)
	}
	for _, want := range []string{"cron@host-a", "fence " + fence, "left", "exit 75"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("conflict line lacks %q: %s", want, r.stderr)
		}
	}
	assertOneLine(t, r, "conflict")
	if _, err := os.Stat(dir + "/second-ran"); err == nil {
		t.Error("the second command ran while the lock was held")
	}

	_ = first.Process.Signal(syscall.SIGTERM)
	_ = first.Wait()
	if code := first.ProcessState.ExitCode(); code != 128+int(syscall.SIGTERM) {
		t.Errorf("first run: exit %d after SIGTERM, want %d (stderr %s)", code, 128+int(syscall.SIGTERM), err1.String())
	}
	if r := runBin(t, env, "run", "nightly", "--", "true"); r.code != 0 {
		t.Errorf("after the first run ended the lock is still held: %d %s", r.code, r.stderr)
	}
}

// TestRunStoppedHolderLosesItsLease: a `dlock run` SIGSTOPped past its TTL
// loses the lock to another run; on SIGCONT it terminates its command and
// exits 76. The second case ignores SIGTERM and is killed after --grace.
func TestRunStoppedHolderLosesItsLease(t *testing.T) {
	for _, tc := range []struct {
		name, script string
		wantKill     bool
	}{
		{"command obeys SIGTERM", `trap 'echo TERM > %s/term; exit 143' TERM; while true; do sleep 0.1; done`, false},
		{"command ignores SIGTERM", `trap 'echo TERM > %s/term' TERM; while true; do sleep 0.1; done`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := []string{"DLOCK_URL=" + fileURL(t)}
			dir := t.TempDir()
			var out, errb syncBuffer
			script := "echo $$ > " + dir + "/pid; " + strings.ReplaceAll(tc.script, "%s", dir)
			a := startDlock(t, env, &out, &errb, "run", "--ttl", "1s", "--grace", "1s", "job", "--", "sh", "-c", script)
			childPid, _ := strconv.Atoi(waitFile(t, dir+"/pid", 30*time.Second))

			_ = a.Process.Signal(syscall.SIGSTOP)
			takeOver(t, env)
			_ = a.Process.Signal(syscall.SIGCONT)
			done := make(chan struct{})
			go func() { _ = a.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(60 * time.Second):
				t.Fatalf("dlock did not exit after SIGCONT; stderr %s", errb.String())
			}
			if code := a.ProcessState.ExitCode(); code != ExitLeaseLost {
				t.Errorf("exit %d, want %d; stderr %s", code, ExitLeaseLost, errb.String())
			}
			if _, err := os.Stat(dir + "/term"); err != nil {
				t.Errorf("the command never got SIGTERM")
			}
			if syscall.Kill(childPid, 0) == nil {
				t.Errorf("the command (pid %d) is still running", childPid)
			}
			stderr := errb.String()
			for _, want := range []string{"lost", "SIGTERM", "exiting 76"} {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr lacks %q: %s", want, stderr)
				}
			}
			if tc.wantKill != strings.Contains(stderr, "SIGKILL") {
				t.Errorf("SIGKILL mentioned = %v, want %v: %s", !tc.wantKill, tc.wantKill, stderr)
			}
		})
	}
}

// takeOver runs `dlock run job` until it gets the lock (the stopped
// holder's lease must expire first).
func takeOver(t *testing.T, env []string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := runBin(t, env, "run", "job", "--", "true")
		if r.code == 0 {
			return
		}
		if r.code != ExitHeld || time.Now().After(deadline) {
			t.Fatalf("taking over: exit %d, %s", r.code, r.stderr)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestRunStatusLineOnlyOnATerminal: waiting with stderr not a terminal
// prints nothing while waiting.
func TestRunStatusLineOnlyOnATerminal(t *testing.T) {
	env := []string{"DLOCK_URL=" + fileURL(t)}
	dir := t.TempDir()
	var out, errb syncBuffer
	first := startDlock(t, env, &out, &errb, "run", "--ttl", "5s", "j", "--", "sh", "-c", "echo x > "+dir+"/held; sleep 1.5")
	waitFile(t, dir+"/held", 30*time.Second)
	r := runBin(t, env, "run", "--wait", "30s", "j", "--", "echo", "second")
	_ = first.Wait()
	if r.code != 0 || strings.TrimSpace(r.stdout) != "second" {
		t.Fatalf("waiting run: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if r.stderr != "" {
		t.Errorf("stderr is not a terminal but got %q", r.stderr)
	}
}
