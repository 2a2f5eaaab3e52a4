package demo

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlockdev/dlock/internal/testing/testserver"
)

// TestDemoURLSelectsBackend: --url runs the demo on that backend, given
// before or after the subcommand, and with a password in the URL no worker
// process ever shows it on its command line (readable by every user).
func TestDemoURLSelectsBackend(t *testing.T) {
	srv := testserver.Redis(t, "--requirepass", "s3cret-demo")
	url := "redis://:s3cret-demo@" + srv.Addr
	for _, args := range [][]string{{"demo", "correct", "--url", url}, {"--url", url, "demo", "correct"}} {
		out, workers := runWatchingWorkers(t, args...)
		if !strings.Contains(out, "backend redis://") || !strings.Contains(out, "verdict: no overlap") {
			t.Errorf("dlock %v did not run on Redis:\n%s", args[:2], out)
		}
		if len(workers) == 0 {
			t.Fatalf("dlock %v: saw no worker process", args[:2])
		}
		for _, w := range workers {
			if strings.Contains(w, "s3cret-demo") {
				t.Errorf("a worker's command line carries the password: %q", w)
			}
		}
	}
}

// runWatchingWorkers runs dlock with args and, while it runs, collects the
// command lines of its demo worker processes.
func runWatchingWorkers(t *testing.T, args ...string) (stdout string, workers []string) {
	t.Helper()
	cmd := exec.Command(dlockBin, append(args, demoFlags...)...)
	cmd.Env = withoutEnv(os.Environ(), "DLOCK_URL")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	seen := map[string]bool{}
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("dlock %v: %v\n%s", args, err, out.String())
			}
			for w := range seen {
				workers = append(workers, w)
			}
			return out.String(), workers
		case <-time.After(5 * time.Millisecond):
			for _, c := range workerCmdlines() {
				seen[c] = true
			}
		}
	}
}

// workerCmdlines returns the command lines of the running demo workers.
func workerCmdlines() []string {
	paths, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var out []string
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(b, []byte(WorkerCommand)) {
			continue
		}
		if pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p))); pid != os.Getpid() {
			out = append(out, string(bytes.ReplaceAll(b, []byte{0}, []byte{' '})))
		}
	}
	return out
}

// TestDemoIgnoresDLOCKURL: the demo never runs on $DLOCK_URL (the user's
// real lock state); without --url it takes a fresh temporary file.
func TestDemoIgnoresDLOCKURL(t *testing.T) {
	r := runBin(t, []string{"DLOCK_URL=mem://not-for-demos"}, append([]string{"demo", "correct"}, demoFlags...)...)
	if r.code != 0 || !strings.Contains(r.stdout, "backend file://") {
		t.Errorf("demo with $DLOCK_URL set: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
}

// TestDemoHelpSaysWhatURLDoes: `demo --help` promises --url and says that
// $DLOCK_URL is ignored, never the global "default $DLOCK_URL".
func TestDemoHelpSaysWhatURLDoes(t *testing.T) {
	r := runBin(t, nil, "demo", "--help")
	if r.code != 0 || !strings.Contains(r.stdout, "--url") || !strings.Contains(r.stdout, "$DLOCK_URL is ignored") ||
		strings.Contains(r.stdout, "default $DLOCK_URL") {
		t.Errorf("demo --help (exit %d) misstates --url:\n%s", r.code, r.stdout)
	}
}

// TestDemoListCommand: `dlock demo list` lists the scenarios and exits 0.
func TestDemoListCommand(t *testing.T) {
	r := runBin(t, nil, "demo", "list")
	if r.code != 0 || strings.Count(r.stdout, "\n") != len(scenarios) {
		t.Errorf("demo list: exit %d, %d lines (want %d)\n%s%s", r.code, strings.Count(r.stdout, "\n"), len(scenarios), r.stdout, r.stderr)
	}
	for _, s := range scenarios {
		if !strings.Contains(r.stdout, s.name) {
			t.Errorf("demo list lacks %q", s.name)
		}
	}
}
