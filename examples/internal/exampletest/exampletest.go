// Package exampletest builds an example program and runs it as separate
// OS processes, for the examples' end-to-end tests.
package exampletest

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dlockdev/dlock/internal/testing/testserver"
	"go.uber.org/goleak"
)

var built struct {
	sync.Mutex
	dir string
	bin map[string]string
}

// Main runs the tests, removes the binaries Build made, and fails the run
// if goroutines leaked (goleak).
func Main(m *testing.M) {
	code := testserver.KeepShared(m).Run()
	built.Lock()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	built.Unlock()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// Build compiles the main package in dir (usually ".") once per test
// binary and returns the program's path. Use it with Main.
func Build(t *testing.T, dir string) string {
	t.Helper()
	built.Lock()
	defer built.Unlock()
	if bin, ok := built.bin[dir]; ok {
		return bin
	}
	if built.dir == "" {
		d, err := os.MkdirTemp("", "dlock-example-")
		if err != nil {
			t.Fatal(err)
		}
		built.dir, built.bin = d, map[string]string{}
	}
	bin := filepath.Join(built.dir, fmt.Sprintf("example%d", len(built.bin)))
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	built.bin[dir] = bin
	return bin
}

// Proc is a running example process.
type Proc struct {
	t     *testing.T
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
	done  chan struct{}
	mu    sync.Mutex
	out   []string
	err   error
}

// Start runs bin with args and extra environment; the process is killed
// in t.Cleanup if still running. name labels its output in the test log.
func Start(t *testing.T, name, bin string, env []string, args ...string) *Proc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = &logWriter{t: t, name: name}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &Proc{t: t, name: name, cmd: cmd, stdin: stdin, lines: make(chan string, 1000), done: make(chan struct{})}
	go p.read(stdout)
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		go p.drain()
		<-p.done
	})
	return p
}

func (p *Proc) read(r io.Reader) {
	s := bufio.NewScanner(r)
	for s.Scan() {
		line := s.Text()
		p.t.Logf("%s: %s", p.name, line)
		p.mu.Lock()
		p.out = append(p.out, line)
		p.mu.Unlock()
		p.lines <- line
	}
	close(p.lines)
	p.err = p.cmd.Wait()
	close(p.done)
}

// Expect waits for an output line starting with prefix and returns it.
func (p *Proc) Expect(prefix string, timeout time.Duration) string {
	p.t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				p.t.Fatalf("%s exited before printing %q", p.name, prefix)
			}
			if strings.HasPrefix(line, prefix) {
				return line
			}
		case <-deadline:
			p.t.Fatalf("%s did not print %q within %s", p.name, prefix, timeout)
		}
	}
}

// drain discards lines nobody waits for (read records them all), so that
// the reader never blocks on a full channel.
func (p *Proc) drain() {
	for range p.lines {
	}
}

// Send writes a line to the process's stdin.
func (p *Proc) Send(line string) {
	if _, err := io.WriteString(p.stdin, line+"\n"); err != nil {
		p.t.Fatalf("write to %s: %v", p.name, err)
	}
}

// Signal sends sig to the process.
func (p *Proc) Signal(sig syscall.Signal) {
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("signal %s: %v", p.name, err)
	}
}

// Wait waits for the process to exit and returns its exit code and output.
func (p *Proc) Wait(timeout time.Duration) (code int, out []string) {
	p.t.Helper()
	go p.drain()
	select {
	case <-p.done:
	case <-time.After(timeout):
		p.t.Fatalf("%s did not exit within %s", p.name, timeout)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd.ProcessState.ExitCode(), p.out
}

// Run starts bin and waits for it to exit.
func Run(t *testing.T, name, bin string, env []string, timeout time.Duration, args ...string) (int, []string) {
	t.Helper()
	return Start(t, name, bin, env, args...).Wait(timeout)
}

type logWriter struct {
	t    *testing.T
	name string
}

func (w *logWriter) Write(b []byte) (int, error) {
	w.t.Logf("%s stderr: %s", w.name, strings.TrimRight(string(b), "\n"))
	return len(b), nil
}
