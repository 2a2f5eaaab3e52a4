package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dlockdev/dlock"
)

// child is the command run under the lease, in its own process group.
type child struct {
	cmd    *exec.Cmd
	exited chan error
}

func startChild(lease *dlock.Lease, opts *runOptions, io *IO) (*child, error) {
	c := exec.Command(opts.Command[0], opts.Command[1:]...)
	c.Stdin, c.Stdout, c.Stderr = io.In, io.Out, io.Err
	c.Env = childEnv(os.Environ(), lease)
	// Own process group: the whole group is signalled on loss. Pdeathsig:
	// if dlock itself is killed, the command must not run on unguarded.
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := c.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", opts.Command[0], errors.Unwrap(err))
	}
	ch := &child{cmd: c, exited: make(chan error, 1)}
	go func() { ch.exited <- c.Wait() }()
	return ch, nil
}

// childEnv is env with the lease's variables set and DLOCK_URL removed
// when it holds a password.
func childEnv(env []string, lease *dlock.Lease) []string {
	out := make([]string, 0, len(env)+3)
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		switch {
		case k == "DLOCK_NAME" || k == "DLOCK_FENCE" || k == "DLOCK_TOKEN":
			continue
		case k == dlock.EnvURL && dlock.Redact(v) != v:
			continue
		}
		out = append(out, kv)
	}
	return append(out,
		"DLOCK_NAME="+lease.Name(),
		"DLOCK_FENCE="+strconv.FormatUint(lease.Fence(), 10),
		"DLOCK_TOKEN="+lease.Token())
}

// signal sends s to the child's whole process group.
func (c *child) signal(s syscall.Signal) {
	_ = syscall.Kill(-c.cmd.Process.Pid, s)
}

// exitCode is the child's exit code, 128+N when killed by signal N.
func (c *child) exitCode() int {
	ws, ok := c.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return c.cmd.ProcessState.ExitCode()
}

// superviseCommand runs the command until it exits, forwarding signals and
// stopping it if the lease is lost, then releases the lease.
func superviseCommand(lease *dlock.Lease, opts *runOptions, io *IO, sigs <-chan os.Signal) error {
	c, err := startChild(lease, opts, io)
	if err != nil {
		_ = lease.Release(context.Background())
		return err
	}
	lost := watchChild(c, lease, opts, io, sigs)
	relErr := lease.Release(context.Background())
	code := c.exitCode()
	if lost == nil && errors.Is(relErr, dlock.ErrLost) {
		lost = relErr
	}
	if lost != nil {
		return exitWith(ExitLeaseLost, fmt.Errorf("lease on %q was lost while the command ran (command exit status %d); exiting %d",
			opts.Name, code, ExitLeaseLost))
	}
	if relErr != nil {
		fmt.Fprintln(io.Err, errorLine(fmt.Errorf("warning: %w", relErr)))
	}
	if code != 0 {
		return exitWith(code, nil)
	}
	return nil
}

// watchChild waits for the child to exit. It forwards signals, and on loss
// of the lease sends SIGTERM to the group, then SIGKILL after the grace.
// It returns the lease's loss, if the lease was lost while the child ran.
func watchChild(c *child, lease *dlock.Lease, opts *runOptions, io *IO, sigs <-chan os.Signal) error {
	done := lease.Done()
	var grace <-chan time.Time
	var lost error
	for {
		select {
		case <-c.exited:
			return lost
		case s := <-sigs:
			c.signal(s.(syscall.Signal))
		case <-done:
			done = nil
			if lost = lease.Err(); !errors.Is(lost, dlock.ErrLost) {
				lost = nil
				continue
			}
			fmt.Fprintln(io.Err, errorLine(fmt.Errorf("%v; sending SIGTERM to the command (process group %d)", lost, c.cmd.Process.Pid)))
			c.signal(syscall.SIGTERM)
			grace = time.After(opts.Grace)
		case <-grace:
			grace = nil
			fmt.Fprintln(io.Err, errorLine(fmt.Errorf("command still running %s after SIGTERM; sending SIGKILL", opts.Grace)))
			c.signal(syscall.SIGKILL)
		}
	}
}
