package cli

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dlockdev/dlock/internal/testing/testserver"
)

// These tests run real process trees under the dlock binary and kill
// dlock, its guard, or its lease, then check /proc for every process the
// job started. DLOCK_TEST_TRIALS sets the number of trials (default 2, 5 in make test-long);
// run with -v to see the measured times.

func trials() int { return testserver.Trials(2) }

// alive reports whether pid is a living process (not gone, not a zombie).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i > 0 && i+2 < len(b) && b[i+2] != 'Z' && b[i+2] != 'X'
}

// ppidOf is pid's parent, from /proc.
func ppidOf(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b)[strings.LastIndexByte(string(b), ')')+1:])
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// readPids waits until path holds n lines of pids and returns them.
func readPids(t *testing.T, path string, n int) []int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, _ := os.ReadFile(path)
		lines := strings.Fields(string(b))
		if len(lines) >= n && strings.HasSuffix(string(b), "\n") {
			pids := make([]int, len(lines))
			for i, l := range lines {
				pids[i], _ = strconv.Atoi(l)
			}
			return pids
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d pids after 30s, want %d", path, len(lines), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// untilGone polls until none of pids is alive and returns how long it took,
// failing after limit.
func untilGone(t *testing.T, pids []int, since time.Time, limit time.Duration) time.Duration {
	t.Helper()
	for {
		left := slices.DeleteFunc(slices.Clone(pids), func(p int) bool { return !alive(p) })
		if len(left) == 0 {
			return time.Since(since)
		}
		if time.Since(since) > limit {
			for _, p := range left {
				_ = syscall.Kill(p, syscall.SIGKILL)
			}
			t.Fatalf("processes %v of the job still alive %s after the event", left, limit)
		}
		time.Sleep(time.Millisecond)
	}
}

// stats renders min/median/max of ds.
func stats(ds []time.Duration) string {
	s := slices.Clone(ds)
	slices.Sort(s)
	r := func(d time.Duration) string { return d.Round(100 * time.Microsecond).String() }
	return "n=" + strconv.Itoa(len(s)) + " min " + r(s[0]) + " median " + r(s[len(s)/2]) + " max " + r(s[len(s)-1])
}

// jobScripts start the real work as children of the command: a background
// child (sleep & wait), and a grandchild that double-forks into its own
// session, leaving the process group. Each writes its pids to $PIDS.
var jobScripts = []struct {
	name, script string
	pids         int
}{
	{"sleep & wait", `echo $$ >> "$PIDS"; sleep 300 & echo $! >> "$PIDS"; wait`, 2},
	{"double fork and setsid", `echo $$ >> "$PIDS"; (setsid sh -c 'echo $$ >> "$PIDS"; exec sleep 300' &); sleep 300 & echo $! >> "$PIDS"; wait`, 3},
}

// TestRunKilledDlockTakesItsJobAlong: kill -9 of dlock; every process of
// the job, including a setsid'd double-forked grandchild, is gone well
// before the lease could expire (measured: see the log).
func TestRunKilledDlockTakesItsJobAlong(t *testing.T) {
	const ttl = 10 * time.Second
	for _, js := range jobScripts {
		t.Run(js.name, func(t *testing.T) {
			var times []time.Duration
			for range trials() {
				dir := t.TempDir()
				env := []string{"DLOCK_URL=" + fileURL(t), "PIDS=" + filepath.Join(dir, "pids")}
				var out, errb syncBuffer
				d := startDlock(t, env, &out, &errb, "run", "--ttl", ttl.String(), "k", "--", "sh", "-c", js.script)
				pids := readPids(t, filepath.Join(dir, "pids"), js.pids)
				guard := ppidOf(t, pids[0])
				if guard == d.Process.Pid {
					t.Fatalf("the command's parent is dlock itself, not a guard")
				}
				start := time.Now()
				_ = d.Process.Kill()
				times = append(times, untilGone(t, append(pids, guard), start, ttl/2))
				_ = d.Wait()
			}
			t.Logf("kill -9 dlock -> job and guard gone: %s", stats(times))
		})
	}
}

// TestRunKilledGuardTakesItsJobAlong: kill -9 of the guard alone; dlock
// kills the job itself (orphans were re-parented to it, a subreaper),
// and exits 1 saying so.
func TestRunKilledGuardTakesItsJobAlong(t *testing.T) {
	for _, js := range jobScripts {
		t.Run(js.name, func(t *testing.T) {
			var gone, exited []time.Duration
			for range trials() {
				dir := t.TempDir()
				env := []string{"DLOCK_URL=" + fileURL(t), "PIDS=" + filepath.Join(dir, "pids")}
				var out, errb syncBuffer
				d := startDlock(t, env, &out, &errb, "run", "--ttl", "10s", "k", "--", "sh", "-c", js.script)
				pids := readPids(t, filepath.Join(dir, "pids"), js.pids)
				guard := ppidOf(t, pids[0])
				start := time.Now()
				_ = syscall.Kill(guard, syscall.SIGKILL)
				gone = append(gone, untilGone(t, pids, start, 5*time.Second))
				_ = d.Wait()
				exited = append(exited, time.Since(start))
				if code := d.ProcessState.ExitCode(); code != ExitError {
					t.Errorf("dlock exit %d after its guard was killed, want %d; stderr %s", code, ExitError, errb.String())
				}
				if s := errb.String(); !strings.Contains(s, "guard process") || !strings.Contains(s, "killed") {
					t.Errorf("stderr does not say the guard died and the command was killed: %s", s)
				}
				if r := runBin(t, env[:1], "run", "k", "--", "true"); r.code != 0 {
					t.Errorf("the lock was not released: exit %d %s", r.code, r.stderr)
				}
			}
			t.Logf("kill -9 guard -> job gone: %s; -> dlock exited: %s", stats(gone), stats(exited))
		})
	}
}

// TestRunLostLeaseStopsTheWholeJob: a force-release takes the lease away;
// the command, its background child and an escapee in its own session all
// get SIGTERM; a job that traps it is SIGKILLed after --grace; dlock exits
// 76 within the grace period after the loss line.
func TestRunLostLeaseStopsTheWholeJob(t *testing.T) {
	const grace = time.Second
	// Each process writes "TERM <pid>" to $TERMS when it gets SIGTERM.
	const trapping = `trap 'echo TERM $$ >> "$TERMS"' TERM; echo $$ >> "$PIDS"; ` +
		`sh -c 'trap "echo TERM \$\$ >> \"\$TERMS\"" TERM; echo $$ >> "$PIDS"; while :; do sleep 0.05; done' & ` +
		`setsid sh -c 'trap "echo TERM \$\$ >> \"\$TERMS\"" TERM; echo $$ >> "$PIDS"; while :; do sleep 0.05; done' & ` +
		`while :; do sleep 0.05; done`
	const obeying = `echo $$ >> "$PIDS"; sleep 300 & echo $! >> "$PIDS"; (setsid sh -c 'echo $$ >> "$PIDS"; exec sleep 300' &); wait`
	for _, tc := range []struct {
		name, script string
		terms        int
		wantKill     bool
	}{
		{"job traps SIGTERM", trapping, 3, true},
		{"job obeys SIGTERM", obeying, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var exits []time.Duration
			for range trials() {
				dir := t.TempDir()
				url := fileURL(t)
				env := []string{"DLOCK_URL=" + url, "PIDS=" + filepath.Join(dir, "pids"), "TERMS=" + filepath.Join(dir, "terms")}
				var out, errb syncBuffer
				d := startDlock(t, env, &out, &errb, "run", "--ttl", "3s", "--grace", grace.String(), "k", "--", "sh", "-c", tc.script)
				pids := readPids(t, filepath.Join(dir, "pids"), 3)
				if r := runBin(t, env[:1], "release", "--force", "k"); r.code != 0 {
					t.Fatalf("release --force: %d %s", r.code, r.stderr)
				}
				lossAt := waitFor(t, &errb, "sending SIGTERM", 30*time.Second)
				_ = d.Wait()
				exits = append(exits, time.Since(lossAt))
				if code := d.ProcessState.ExitCode(); code != ExitLeaseLost {
					t.Errorf("exit %d, want %d; stderr %s", code, ExitLeaseLost, errb.String())
				}
				untilGone(t, pids, time.Now(), time.Second)
				if tc.terms > 0 {
					b, _ := os.ReadFile(filepath.Join(dir, "terms"))
					for _, p := range pids {
						if !strings.Contains(string(b), "TERM "+strconv.Itoa(p)+"\n") {
							t.Errorf("process %d never got SIGTERM (terms: %q)", p, b)
						}
					}
				}
				if got := strings.Contains(errb.String(), "SIGKILL"); got != tc.wantKill {
					t.Errorf("SIGKILL mentioned = %v, want %v: %s", got, tc.wantKill, errb.String())
				}
			}
			t.Logf("loss line -> dlock exited (grace %s): %s", grace, stats(exits))
		})
	}
}

// waitFor polls b until it contains s and returns when it was first seen.
func waitFor(t *testing.T, b *syncBuffer, s string, limit time.Duration) time.Time {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !strings.Contains(b.String(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("stderr lacks %q after %s: %s", s, limit, b.String())
		}
		time.Sleep(time.Millisecond)
	}
	return time.Now()
}

// TestRunJobGetsNoGuardDescriptors: the guard's pipes do not leak into the
// command (it would keep dlock's death or the guard's from being seen).
func TestRunJobGetsNoGuardDescriptors(t *testing.T) {
	r := runBin(t, []string{"DLOCK_URL=" + fileURL(t)}, "run", "k", "--", "sh", "-c", "exec ls -l /proc/self/fd")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	// Descriptors this test process inherited without close-on-exec pass
	// through to every child, and the command's own 0-2 are dlock's: only
	// other pipes would come from dlock or its guard.
	allowed := map[string]bool{}
	ents, _ := os.ReadDir("/proc/self/fd")
	for _, e := range ents {
		if target, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil {
			allowed[target] = true
		}
	}
	type fd struct {
		n      int
		target string
	}
	var fds []fd
	for _, line := range strings.Split(r.stdout, "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || f[len(f)-2] != "->" {
			continue
		}
		n, _ := strconv.Atoi(f[len(f)-3])
		fds = append(fds, fd{n, f[len(f)-1]})
		if n <= 2 {
			allowed[f[len(f)-1]] = true
		}
	}
	if len(fds) < 3 {
		t.Fatalf("descriptors not listed: %q", r.stdout)
	}
	for _, d := range fds {
		if d.n > 2 && strings.HasPrefix(d.target, "pipe:") && !allowed[d.target] {
			t.Errorf("the command inherited descriptor %d -> %s", d.n, d.target)
		}
	}
}

// TestRunLostLeaseWithStoppedGuard: the guard is stopped (SIGSTOP) when the
// lease is lost. At the end of the grace dlock kills the guard's
// descendants itself, gives the silent guard a second, and exits 76; the
// guard, once continued, finds dlock gone and exits.
func TestRunLostLeaseWithStoppedGuard(t *testing.T) {
	const grace = time.Second
	dir := t.TempDir()
	env := []string{"DLOCK_URL=" + fileURL(t), "PIDS=" + filepath.Join(dir, "pids")}
	var out, errb syncBuffer
	d := startDlock(t, env, &out, &errb, "run", "--ttl", "3s", "--grace", grace.String(), "k", "--", "sh", "-c",
		`trap '' TERM; echo $$ >> "$PIDS"; setsid sh -c 'trap "" TERM; echo $$ >> "$PIDS"; while :; do sleep 0.05; done' & while :; do sleep 0.05; done`)
	pids := readPids(t, filepath.Join(dir, "pids"), 2)
	guard := ppidOf(t, pids[0])
	_ = syscall.Kill(guard, syscall.SIGSTOP)
	t.Cleanup(func() { _ = syscall.Kill(guard, syscall.SIGKILL) })
	if r := runBin(t, env[:1], "release", "--force", "k"); r.code != 0 {
		t.Fatalf("release --force: %d %s", r.code, r.stderr)
	}
	lossAt := waitFor(t, &errb, "sending SIGTERM", 30*time.Second)
	_ = d.Wait()
	t.Logf("loss line -> dlock exited with its guard stopped (grace %s): %s", grace, time.Since(lossAt).Round(time.Millisecond))
	if code := d.ProcessState.ExitCode(); code != ExitLeaseLost {
		t.Errorf("exit %d, want %d; stderr %s", code, ExitLeaseLost, errb.String())
	}
	if !strings.Contains(errb.String(), "did not report") {
		t.Errorf("stderr does not say the guard was silent: %s", errb.String())
	}
	untilGone(t, pids, time.Now(), time.Second)
	_ = syscall.Kill(guard, syscall.SIGCONT)
	untilGone(t, []int{guard}, time.Now(), 10*time.Second)
}
