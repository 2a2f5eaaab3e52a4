package jobguard

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain lets Start re-execute this test binary as the guard.
func TestMain(m *testing.M) {
	if IsGuard() {
		os.Exit(Main())
	}
	goleak.VerifyTestMain(m)
}

func start(t *testing.T, grace time.Duration, script string, env ...string) (*Job, *bytes.Buffer) {
	t.Helper()
	var out bytes.Buffer
	j, err := Start(Spec{Argv: []string{"sh", "-c", script}, Env: append(os.Environ(), env...),
		Stdout: &out, Stderr: &out, Grace: grace})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = j.Signal(syscall.SIGKILL)
		j.Wait()
	})
	return j, &out
}

func alive(pid int) bool {
	p, ok := readStat(pid)
	return ok && !p.zombie
}

func waitPids(t *testing.T, path string, n int) []int {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, _ := os.ReadFile(path)
		f := strings.Fields(string(b))
		if len(f) >= n && bytes.HasSuffix(b, []byte("\n")) {
			pids := make([]int, len(f))
			for i := range f {
				pids[i], _ = strconv.Atoi(f[i])
			}
			return pids
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d pids in %s, want %d", len(f), path, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestExitStatusPassesThrough(t *testing.T) {
	j, out := start(t, time.Second, "echo hello; exit 7")
	res := j.Wait()
	if res.Err != nil || res.Status.ExitStatus() != 7 || res.Left != 0 {
		t.Fatalf("result %+v, want exit 7", res)
	}
	if out.String() != "hello\n" {
		t.Errorf("output %q", out.String())
	}
	if j.Pid() == j.GuardPid() || j.Pid() <= 0 {
		t.Errorf("pids: command %d, guard %d", j.Pid(), j.GuardPid())
	}
}

// TestMarkerNotPassedOn: the job does not inherit the guard's marker (a
// dlock run inside the job would take itself for a guard).
func TestMarkerNotPassedOn(t *testing.T) {
	j, out := start(t, time.Second, "env")
	if res := j.Wait(); res.Err != nil || res.Status.ExitStatus() != 0 {
		t.Fatalf("result %+v", res)
	}
	if strings.Contains(out.String(), envMarker) || !strings.Contains(out.String(), "PATH=") {
		t.Errorf("the job's environment carries %s (or is empty): %q", envMarker, out.String())
	}
}

func TestSignalReachesEscapees(t *testing.T) {
	pids := filepath.Join(t.TempDir(), "pids")
	j, _ := start(t, time.Second,
		`echo $$ >> "$P"; setsid sh -c 'echo $$ >> "$P"; exec sleep 300' & sleep 300 & echo $! >> "$P"; wait`, "P="+pids)
	ps := waitPids(t, pids, 3)
	if err := j.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	res := j.Wait()
	if res.Err != nil || !res.Status.Signaled() || res.Status.Signal() != syscall.SIGTERM {
		t.Errorf("result %+v, want killed by SIGTERM", res)
	}
	for _, p := range ps {
		if alive(p) {
			t.Errorf("process %d survived SIGTERM", p)
		}
	}
}

// TestLeftoversAreStopped: processes the command leaves behind get SIGTERM,
// and SIGKILL after the grace if they ignore it.
func TestLeftoversAreStopped(t *testing.T) {
	dir := t.TempDir()
	j, _ := start(t, 300*time.Millisecond,
		`sh -c 'trap "" TERM; echo $$ >> "$D/pids"; while :; do sleep 0.05; done' &
		 sh -c 'trap "echo TERM >> \"$D/term\"; exit 0" TERM; echo $$ >> "$D/pids"; while :; do sleep 0.05; done' &
		 while [ $(wc -l < "$D/pids" 2>/dev/null || echo 0) -lt 2 ]; do sleep 0.01; done; exit 0`, "D="+dir)
	res := j.Wait()
	if res.Err != nil || res.Status.ExitStatus() != 0 || res.Left < 2 { // the two shells, and maybe their sleeps
		t.Fatalf("result %+v, want exit 0 with at least 2 left", res)
	}
	for _, p := range waitPids(t, filepath.Join(dir, "pids"), 2) {
		if alive(p) {
			t.Errorf("leftover %d still alive", p)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "term")); string(b) != "TERM\n" {
		t.Errorf("the leftover that obeys SIGTERM did not get it: %q", b)
	}
}

func TestStartErrors(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		cmd  string
		want syscall.Errno
	}{
		{"no-such-command-jobguard", syscall.ENOENT},
		{filepath.Join(dir, "missing"), syscall.ENOENT},
		{plain, syscall.EACCES},
	} {
		_, err := Start(Spec{Argv: []string{tc.cmd}, Env: os.Environ()})
		var se *StartError
		if !errors.As(err, &se) || !errors.Is(err, tc.want) {
			t.Errorf("Start(%s) = %v, want a StartError matching %v", tc.cmd, err, tc.want)
		}
	}
}

// TestGuardKilledNotSubreaper: this test process is not a subreaper, so
// when the guard dies the job's orphans go to init; the job's process
// group is killed all the same.
func TestGuardKilledNotSubreaper(t *testing.T) {
	pids := filepath.Join(t.TempDir(), "pids")
	j, _ := start(t, time.Second, `echo $$ >> "$P"; sleep 300 & echo $! >> "$P"; wait`, "P="+pids)
	ps := waitPids(t, pids, 2)
	_ = syscall.Kill(j.GuardPid(), syscall.SIGKILL)
	res := j.Wait()
	if res.Err == nil || !strings.Contains(res.Err.Error(), "guard process") {
		t.Fatalf("result %+v, want an error naming the guard", res)
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, p := range ps {
		for alive(p) && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if alive(p) {
			t.Errorf("process %d survived its guard", p)
		}
	}
}

// TestMainRefusesWithoutPipes: the marker alone (a user's environment)
// does not make a guard.
func TestMainRefusesWithoutPipes(t *testing.T) {
	cmd := exec.Command(os.Args[0], "--", "true")
	cmd.Env = append(os.Environ(), envMarker+"=1;grace=1s")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 125 || !strings.Contains(string(out), "not a pipe") {
		t.Fatalf("exit %v, output %q; want 125 naming the missing pipe", err, out)
	}
}

func TestParseMarker(t *testing.T) {
	if d, err := parseMarker("1;grace=250ms"); err != nil || d != 250*time.Millisecond {
		t.Errorf("parseMarker = %v, %v", d, err)
	}
	for _, bad := range []string{"", "1", "2;grace=1s", "1;grace=soon", "1;wait=1s"} {
		if _, err := parseMarker(bad); err == nil {
			t.Errorf("parseMarker(%q) accepted", bad)
		}
	}
}

func TestDescendants(t *testing.T) {
	procs := []proc{{pid: 1}, {pid: 10, ppid: 1}, {pid: 11, ppid: 10}, {pid: 12, ppid: 11, zombie: true},
		{pid: 13, ppid: 12}, {pid: 20, ppid: 1}}
	var got []int
	for _, p := range descendants(procs, 10) {
		got = append(got, p.pid)
	}
	if !slices.Equal(got, []int{11, 13}) {
		t.Errorf("descendants of 10 = %v, want [11 13] (zombies skipped, their children kept)", got)
	}
}
