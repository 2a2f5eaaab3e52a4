package cli

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dlockdev/dlock"
)

// demoEnv is the state of one `dlock demo` run: the backend, the temporary
// directory, and the worker processes of the current scenario.
type demoEnv struct {
	opts   *demoOptions
	io     *IO
	exe    string
	root   string // temporary directory of the run
	url    string
	ttl    time.Duration // effective short TTL
	wttl   time.Duration // effective watchdog TTL
	locker *dlock.Locker // the demo's own view of the backend
	runID  string

	dir   string // the current scenario's directory
	start time.Time
	res   *sql.DB // the current scenario's resource database

	mu    sync.Mutex // serialises output
	procs []*proc
}

func newDemoEnv(ctx context.Context, opts *demoOptions, io *IO) (*demoEnv, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("demo: cannot find this executable to start workers: %w", err)
	}
	root, err := demoDir()
	if err != nil {
		return nil, err
	}
	e := &demoEnv{opts: opts, io: io, exe: exe, root: root, url: opts.URL, runID: randomHex(3)}
	if e.url == "" {
		e.url = "file://" + filepath.Join(root, "locks.db")
	}
	if strings.HasPrefix(e.url, "mem:") {
		os.RemoveAll(root)
		return nil, usageErr("demo needs a backend shared by separate processes; mem:// lives inside one process")
	}
	if e.locker, err = openLocker(ctx, e.url); err != nil {
		os.RemoveAll(root)
		return nil, err
	}
	if err := e.migrate(ctx); err != nil {
		e.close()
		return nil, err
	}
	e.ttl, e.wttl = e.backendTTL(opts.TTL), e.backendTTL(opts.WatchdogTTL)
	return e, nil
}

// migrate creates the backend's schema (Postgres lease table) if needed:
// the demo must work on a fresh database.
func (e *demoEnv) migrate(ctx context.Context) error {
	mctx, cancel := withBackendTimeout(ctx)
	defer cancel()
	return explainTimeout(e.locker.Migrate(mctx))
}

// backendTTL raises ttl to what the backend can honour.
func (e *demoEnv) backendTTL(ttl time.Duration) time.Duration {
	caps := e.locker.Capabilities()
	ttl = max(ttl, caps.MinTTL)
	if g := caps.TTLGranularity; g > 0 && ttl%g != 0 {
		ttl = (ttl/g + 1) * g
	}
	return ttl
}

func (e *demoEnv) close() {
	e.killAll()
	if e.res != nil {
		e.res.Close()
	}
	e.locker.Close()
	if e.opts.Keep {
		fmt.Fprintf(e.io.Err, "demo files kept in %s\n", e.root)
		return
	}
	os.RemoveAll(e.root)
}

// begin prepares a scenario: its directory, resource database and header.
func (e *demoEnv) begin(s scenario) {
	e.dir = filepath.Join(e.root, s.name)
	if e.res != nil {
		e.res.Close()
		e.res = nil
	}
	fmt.Fprintf(e.io.Out, "== %s: %s ==\n", s.name, s.title)
	fmt.Fprintf(e.io.Out, "backend %s\n", dlock.Redact(e.url))
	e.start = time.Now()
}

// resource opens (creating) the scenario's resource database.
func (e *demoEnv) resource(sub string) (*sql.DB, error) {
	dir := filepath.Join(e.dir, sub)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	db, err := openResource(dir)
	if err != nil {
		return nil, err
	}
	if e.res != nil {
		e.res.Close()
	}
	e.res = db
	return db, nil
}

// lockName is name made unique to this run.
func (e *demoEnv) lockName(name string) string { return "dlock-demo-" + e.runID + "/" + name }

// say prints one timeline line for label.
func (e *demoEnv) say(label, format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	fmt.Fprintf(e.io.Out, "  %+7.2fs  %-4s %s\n", time.Since(e.start).Seconds(), label, fmt.Sprintf(format, args...))
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// proc is one worker process.
type proc struct {
	label string
	cmd   *exec.Cmd
	done  chan struct{}

	mu      sync.Mutex
	lines   []string
	updated chan struct{}
}

// spawn starts a worker: this binary's hidden __demo-worker command.
func (e *demoEnv) spawn(dir, label, role string, extra ...string) (*proc, error) {
	args := append([]string{"__demo-worker", role, "--dir", filepath.Join(e.dir, dir),
		"--label", label, "--ttl", e.ttl.String()}, extra...)
	p := &proc{label: label, cmd: exec.Command(e.exe, args...), done: make(chan struct{}), updated: make(chan struct{}, 1)}
	p.cmd.Env = append(withoutEnv(withoutEnv(os.Environ(), dlock.EnvURL), demoURLEnv), demoURLEnv+"="+e.url)
	p.cmd.Stdout = &lineWriter{emit: func(s string) { p.add(s); e.say(label, "%s", s) }}
	p.cmd.Stderr = &lineWriter{emit: func(s string) { p.add(s); e.say(label, "! %s", s) }}
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("demo: start worker %s: %w", label, err)
	}
	e.procs = append(e.procs, p)
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	return p, nil
}

func withoutEnv(env []string, key string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, key+"=") {
			out = append(out, kv)
		}
	}
	return out
}

func (p *proc) add(line string) {
	p.mu.Lock()
	p.lines = append(p.lines, line)
	p.mu.Unlock()
	select {
	case p.updated <- struct{}{}:
	default:
	}
}

func (p *proc) has(substr string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.lines {
		if strings.Contains(l, substr) {
			return true
		}
	}
	return false
}

// waitFor waits until the worker has printed a line containing substr.
func (p *proc) waitFor(ctx context.Context, substr string, timeout time.Duration) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for !p.has(substr) {
		select {
		case <-p.updated:
		case <-p.done:
			if p.has(substr) {
				return nil
			}
			return fmt.Errorf("worker %s exited before saying %q", p.label, substr)
		case <-deadline.C:
			return fmt.Errorf("worker %s did not say %q within %s", p.label, substr, timeout)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// wait waits for the worker to exit and returns its exit code.
func (p *proc) wait(ctx context.Context, timeout time.Duration) (int, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode(), nil
	case <-t.C:
		p.kill()
		return -1, fmt.Errorf("worker %s did not finish within %s", p.label, timeout)
	case <-ctx.Done():
		return -1, ctx.Err()
	}
}

func (p *proc) signal(s syscall.Signal) { _ = p.cmd.Process.Signal(s) }

func (p *proc) kill() {
	select {
	case <-p.done:
	default:
		p.signal(syscall.SIGKILL)
		<-p.done
	}
}

// killAll ends every worker of the scenario.
func (e *demoEnv) killAll() {
	for _, p := range e.procs {
		p.kill()
	}
	e.procs = nil
}

// lineWriter calls emit with each complete line written to it.
type lineWriter struct {
	buf  bytes.Buffer
	emit func(string)
}

func (w *lineWriter) Write(b []byte) (int, error) {
	w.buf.Write(b)
	for {
		line, err := w.buf.ReadString('\n')
		if err != nil {
			w.buf.WriteString(line)
			return len(b), nil
		}
		w.emit(strings.TrimRight(line, "\n"))
	}
}
