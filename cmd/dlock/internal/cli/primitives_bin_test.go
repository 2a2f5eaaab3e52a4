package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRunPermitsAtMostTwoAtOnce: three `dlock run --permits 2` started at
// once run their commands at most two at a time (and two at a time, so
// the permits are not a mutex), each under a permit of its own; while two
// hold the permits, a fourth without --wait exits 75.
func TestRunPermitsAtMostTwoAtOnce(t *testing.T) {
	env := []string{"DLOCK_URL=" + fileURL(t)}
	log := filepath.Join(t.TempDir(), "log")
	script := `echo "start $DLOCK_PERMIT" >> ` + log + `; sleep 2; echo "end $DLOCK_PERMIT" >> ` + log
	procs := make([]*syncBuffer, 3)
	var cmds []func() int
	for i := range procs {
		var out syncBuffer
		procs[i] = &syncBuffer{}
		c := startDlock(t, env, &out, procs[i], "run", "--permits", "2", "--wait", "60s", "--ttl", "5s", "jobs", "--", "sh", "-c", script)
		cmds = append(cmds, func() int { _ = c.Wait(); return c.ProcessState.ExitCode() })
	}
	waitLines(t, log, "start", 2, 30*time.Second)
	r := runBin(t, env, "run", "--permits", "2", "jobs", "--", "true")
	if r.code != ExitHeld || !strings.Contains(r.stderr, "all 2 permits") {
		t.Errorf("a run while both permits are held: exit %d, stderr %q; want %d naming all 2 permits", r.code, r.stderr, ExitHeld)
	}
	for i, wait := range cmds {
		if code := wait(); code != 0 {
			t.Errorf("run %d: exit %d; stderr %s", i, code, procs[i].String())
		}
	}
	if most := mostAtOnce(t, readFile(t, log)); most != 2 {
		t.Errorf("%d commands ran at once, want 2:\n%s", most, readFile(t, log))
	}
}

// mostAtOnce replays a log of "start P" / "end P" lines and returns how
// many commands ran at once at the most; it fails t if two running at once
// had the same permit, or a permit is not 0 or 1.
func mostAtOnce(t *testing.T, log string) int {
	t.Helper()
	running, most := map[string]bool{}, 0
	for _, line := range strings.Split(strings.TrimSpace(log), "\n") {
		what, permit, _ := strings.Cut(line, " ")
		if permit != "0" && permit != "1" {
			t.Errorf("DLOCK_PERMIT %q, want 0 or 1", permit)
		}
		switch {
		case what == "start" && running[permit]:
			t.Errorf("permit %s taken twice at once:\n%s", permit, log)
		case what == "start":
			running[permit] = true
		default:
			delete(running, permit)
		}
		most = max(most, len(running))
	}
	if n := strings.Count(log, "start"); n != 3 {
		t.Errorf("%d commands ran, want 3:\n%s", n, log)
	}
	return most
}

// TestElectOneLeaderThenFailover: of two `dlock elect`, only one runs its
// command; kill -9 of the leader's dlock kills its command, and the other
// is elected within the TTL (plus slack) and runs its command with a
// higher DLOCK_TERM. SIGTERM to the new leader ends it with its command's
// status instead of a new campaign.
func TestElectOneLeaderThenFailover(t *testing.T) {
	const ttl = 2 * time.Second
	env := []string{"DLOCK_URL=" + fileURL(t)}
	dir := t.TempDir()
	procs := map[string]*syncBuffer{}
	cmds := map[string]*exec.Cmd{}
	for _, who := range []string{"a", "b"} {
		var out syncBuffer
		procs[who] = &syncBuffer{}
		script := `echo "$DLOCK_TERM $DLOCK_FENCE $$" > ` + filepath.Join(dir, who) + `; exec sleep 60`
		cmds[who] = startDlock(t, env, &out, procs[who], "elect", "--ttl", ttl.String(), "--grace", "1s", "--value", who, "sched", "--", "sh", "-c", script)
	}
	leader := waitAny(t, dir, []string{"a", "b"}, 30*time.Second)
	other := map[string]string{"a": "b", "b": "a"}[leader]
	time.Sleep(1500 * time.Millisecond) // three backoff caps: the other had its chances
	if _, err := os.Stat(filepath.Join(dir, other)); err == nil {
		t.Fatalf("both ran their command; stderr a %q, b %q", procs["a"], procs["b"])
	}
	term1, pid1 := termOf(t, dir, leader)

	killed := time.Now()
	_ = cmds[leader].Process.Kill()
	waitAny(t, dir, []string{other}, ttl+10*time.Second)
	took := time.Since(killed)
	t.Logf("%s elected %s after kill -9 of the leader (ttl %s)", other, took.Round(time.Millisecond), ttl)
	if took > ttl+3*time.Second {
		t.Errorf("the new leader ran its command %s after the kill, want within ttl %s + 3s", took, ttl)
	}
	if term2, _ := termOf(t, dir, other); term2 <= term1 {
		t.Errorf("DLOCK_TERM %d after %d: not greater", term2, term1)
	}
	if syscall.Kill(pid1, 0) == nil {
		t.Errorf("the killed leader's command (pid %d) still runs", pid1)
	}

	c := cmds[other]
	_ = c.Process.Signal(syscall.SIGTERM)
	_ = c.Wait()
	if code := c.ProcessState.ExitCode(); code != 128+int(syscall.SIGTERM) {
		t.Errorf("leader after SIGTERM: exit %d, want %d; stderr %s", code, 128+int(syscall.SIGTERM), procs[other])
	}
}

// termOf reads the "TERM FENCE PID" line the command of who wrote; the
// term and the fence must agree.
func termOf(t *testing.T, dir, who string) (term uint64, pid int) {
	t.Helper()
	f := strings.Fields(readFile(t, filepath.Join(dir, who)))
	if len(f) != 3 || f[0] != f[1] {
		t.Fatalf("%s wrote %q, want TERM FENCE PID with TERM = FENCE", who, f)
	}
	term, _ = strconv.ParseUint(f[0], 10, 64)
	pid, _ = strconv.Atoi(f[2])
	return term, pid
}

// waitAny waits until one of the files names in dir is complete (ends in a
// newline) and returns its name.
func waitAny(t *testing.T, dir string, names []string, timeout time.Duration) string {
	t.Helper()
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		for _, n := range names {
			if b, err := os.ReadFile(filepath.Join(dir, n)); err == nil && strings.HasSuffix(string(b), "\n") {
				return n
			}
		}
	}
	t.Fatalf("none of %v appeared in %s", names, timeout)
	return ""
}

// waitLines waits until path has n lines starting with prefix.
func waitLines(t *testing.T, path, prefix string, n int, timeout time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		b, _ := os.ReadFile(path)
		if strings.Count("\n"+string(b), "\n"+prefix) >= n {
			return
		}
	}
	t.Fatalf("%s has not %d lines %q within %s", path, n, prefix, timeout)
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
