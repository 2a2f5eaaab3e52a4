package demo

import (
	"bytes"
	"context"
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

// proc is one worker process.
type proc struct {
	label string
	cmd   *exec.Cmd
	done  chan struct{}

	mu      sync.Mutex
	lines   []string
	updated chan struct{}
}

// spawn starts a worker: this binary's hidden WorkerCommand.
func (e *env) spawn(dir, label, role string, extra ...string) (*proc, error) {
	args := append([]string{WorkerCommand, role, "--dir", filepath.Join(e.dir, dir),
		"--label", label, "--ttl", e.ttl.String()}, extra...)
	p := &proc{label: label, cmd: exec.Command(e.exe, args...), done: make(chan struct{}), updated: make(chan struct{}, 1)}
	p.cmd.Env = append(withoutEnv(withoutEnv(os.Environ(), dlock.EnvURL), urlEnv), urlEnv+"="+e.url)
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
func (e *env) killAll() {
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

// spawnAll starts one worker per label with the same role and arguments.
func (e *env) spawnAll(ctx context.Context, labels []string, role string, extra ...string) ([]*proc, error) {
	var ps []*proc
	for _, l := range labels {
		p, err := e.spawn("", l, role, extra...)
		if err != nil {
			return nil, err
		}
		ps = append(ps, p)
	}
	return ps, nil
}

// waitAll waits for every worker and fails if one did not exit 0.
func (e *env) waitAll(ctx context.Context, ps []*proc, timeout time.Duration) error {
	for _, p := range ps {
		code, err := p.wait(ctx, timeout)
		if err != nil {
			return err
		}
		if code != 0 {
			return fmt.Errorf("worker %s exited with status %d", p.label, code)
		}
	}
	return nil
}
