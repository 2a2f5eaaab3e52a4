package cli

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dlockdev/dlock/internal/testing/testserver"
)

// TestRunLossOnFrozenBackendExitsWithinGrace: the backend freezes (SIGSTOP)
// while `dlock run` holds its lock. dlock declares the lease lost before it
// can expire, stops the job, and exits 76 within the grace period after the
// loss line, without waiting on the frozen server (it used
// to take 5 s more on Redis and etcd, 15 s on Postgres). Loss-line-to-exit
// times are logged (-v; DLOCK_TEST_TRIALS trials).
func TestRunLossOnFrozenBackendExitsWithinGrace(t *testing.T) {
	const grace = 2 * time.Second
	for _, b := range []struct {
		name  string
		setup func(t *testing.T) (url string, pause, resume func())
	}{
		{"redis", func(t *testing.T) (string, func(), func()) {
			s := testserver.Redis(t)
			return s.URL(), s.Pause, s.Resume
		}},
		{"etcd", func(t *testing.T) (string, func(), func()) {
			s := testserver.Etcd(t)
			return s.URL(), s.Pause, s.Resume
		}},
		{"postgres lease mode", func(t *testing.T) (string, func(), func()) {
			s := testserver.NewPostgres(t)
			if r := runBin(t, nil, "--url", s.URL(), "migrate"); r.code != 0 {
				t.Fatalf("migrate: %d %s", r.code, r.stderr)
			}
			// testserver's Pause stops the postmaster's process group only,
			// but every backend calls setsid: established connections keep
			// answering. Freeze the whole process tree instead.
			tree := func(sig syscall.Signal) func() {
				return func() {
					for _, pid := range postgresTree(t, s.Port) {
						_ = syscall.Kill(pid, sig)
					}
				}
			}
			return s.URL(), tree(syscall.SIGSTOP), tree(syscall.SIGCONT)
		}},
	} {
		t.Run(b.name, func(t *testing.T) {
			url, pause, resume := b.setup(t)
			var exits []time.Duration
			for range trials() {
				dir := t.TempDir()
				env := []string{"DLOCK_URL=" + url, "PIDS=" + filepath.Join(dir, "pids")}
				var out, errb syncBuffer
				d := startDlock(t, env, &out, &errb, "run", "--ttl", "3s", "--grace", grace.String(), "frozen", "--",
					"sh", "-c", `echo $$ >> "$PIDS"; sleep 300 & echo $! >> "$PIDS"; wait`)
				pids := readPids(t, filepath.Join(dir, "pids"), 2)
				pause()
				lossAt := waitFor(t, &errb, "sending SIGTERM", 30*time.Second)
				_ = d.Wait()
				exit := time.Since(lossAt)
				resume()
				exits = append(exits, exit)
				if code := d.ProcessState.ExitCode(); code != ExitLeaseLost {
					t.Errorf("exit %d, want %d; stderr %s", code, ExitLeaseLost, errb.String())
				}
				if exit > grace+time.Second {
					t.Errorf("dlock exited %s after the loss line, grace %s; stderr %s", exit, grace, errb.String())
				}
				untilGone(t, pids, time.Now(), time.Second)
				// Let the frozen-then-resumed lease expire before the next trial.
				takeOverName(t, env[:1], "frozen")
			}
			t.Logf("%s frozen: loss line -> dlock exited (grace %s): %s", b.name, grace, stats(exits))
		})
	}
}

// takeOverName runs `dlock run NAME -- true` until it gets the lock.
func takeOverName(t *testing.T, env []string, name string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := runBin(t, env, "run", name, "--", "true")
		if r.code == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("taking %s over: exit %d, %s", name, r.code, r.stderr)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// postgresTree is the postmaster listening on port (a child of this test
// process) and all its descendants.
func postgresTree(t *testing.T, port int) []int {
	t.Helper()
	type proc struct{ pid, ppid int }
	var procs []proc
	root := 0
	want := "\x00-p\x00" + strconv.Itoa(port) + "\x00"
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		f := strings.Fields(string(b)[strings.LastIndexByte(string(b), ')')+1:])
		ppid, _ := strconv.Atoi(f[1])
		procs = append(procs, proc{pid, ppid})
		if cmd, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline"); ppid == os.Getpid() && strings.Contains(string(cmd), want) {
			root = pid
		}
	}
	if root == 0 {
		t.Fatalf("no postmaster on port %d among this process's children", port)
	}
	tree := []int{root}
	for i := 0; i < len(tree); i++ {
		for _, p := range procs {
			if p.ppid == tree[i] {
				tree = append(tree, p.pid)
			}
		}
	}
	return tree
}
