package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/cmd/dlock/internal/jobguard"
)

// Shell exit codes for a command that cannot run.
const (
	// ExitCannotExecute: the command was found but cannot be executed.
	ExitCannotExecute = 126
	// ExitNotFound: the command was not found.
	ExitNotFound = 127
)

// checkCommand finds the command before the lock is taken, so that a typo
// neither takes the lock nor reads as the command's own failure.
func checkCommand(name string) error {
	if _, err := exec.LookPath(name); err != nil {
		return commandError(name, err)
	}
	return nil
}

// commandError maps a failure to find or execute name to 127 or 126.
func commandError(name string, err error) error {
	var se *jobguard.StartError
	switch {
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOENT):
		return exitWith(ExitNotFound, fmt.Errorf("command not found: %s", name))
	case errors.As(err, &se), errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.EISDIR):
		return exitWith(ExitCannotExecute, fmt.Errorf("cannot execute %s: %v", name, cause(err)))
	}
	return fmt.Errorf("start %s: %w", name, err)
}

// cause is the innermost error's text ("permission denied").
func cause(err error) string {
	for {
		u := errors.Unwrap(err)
		if u == nil {
			return err.Error()
		}
		err = u
	}
}

// startChild starts the command under a guard process (package jobguard):
// in its own process group, killed with everything it started if dlock
// dies.
func startChild(lease *dlock.Lease, opts *runOptions, std *IO) (*jobguard.Job, error) {
	job, err := jobguard.Start(jobguard.Spec{
		Argv: opts.Command, Env: childEnv(os.Environ(), lease),
		Stdin: std.In, Stdout: std.Out, Stderr: std.Err, Grace: opts.Grace,
	})
	if err != nil {
		return nil, commandError(opts.Command[0], err)
	}
	return job, nil
}

// childEnv is env with the lease's variables set (DLOCK_PERMIT for a
// semaphore's permit, DLOCK_TERM for a leader's term) and DLOCK_URL
// removed when it holds a password. Variables of an enclosing dlock are
// dropped, so that a command never sees a permit or term it does not hold.
func childEnv(env []string, lease *dlock.Lease) []string {
	out := make([]string, 0, len(env)+4)
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "DLOCK_NAME", "DLOCK_FENCE", "DLOCK_TOKEN", "DLOCK_PERMIT", "DLOCK_TERM":
			continue
		case dlock.EnvURL:
			if dlock.Redact(v) != v {
				continue
			}
		}
		out = append(out, kv)
	}
	fence := strconv.FormatUint(lease.Fence(), 10)
	out = append(out, "DLOCK_NAME="+lease.Name(), "DLOCK_FENCE="+fence, "DLOCK_TOKEN="+lease.Token())
	switch lease.Kind() {
	case dlock.KindPermit:
		out = append(out, "DLOCK_PERMIT="+strconv.Itoa(lease.Slot()))
	case dlock.KindLeader:
		out = append(out, "DLOCK_TERM="+fence)
	}
	return out
}

// exitCode is the command's exit code, 128+N when killed by signal N.
func exitCode(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

// superviseCommand runs the command until it exits, forwarding signals and
// stopping it if the lease is lost, then releases the lease and closes
// the Locker within a bounded time.
// after, run between the command's end and the release, records what the
// release must follow (a slot's outcome, a minimum hold).
func superviseCommand(l *dlock.Locker, lease *dlock.Lease, opts *runOptions, std *IO, sigs <-chan os.Signal, after func(term)) error {
	t, err := runTerm(lease, opts, std, sigs)
	if err != nil {
		after(term{res: jobguard.Result{Err: err}}) // a claimed slot records the failure
		_, _ = releaseAndClose(l, lease, releaseBudget)
		return err
	}
	after(t)
	return finishTerm(l, lease, opts, std, t)
}

// term is how one run of the command under one lease ended.
type term struct {
	watched
	res jobguard.Result
}

// runTerm starts the command under lease and watches it until it ends
// (see watchChild).
func runTerm(lease *dlock.Lease, opts *runOptions, std *IO, sigs <-chan os.Signal) (term, error) {
	job, err := startChild(lease, opts, std)
	if err != nil {
		return term{}, err
	}
	t := term{watched: watchChild(job, lease, opts, std, sigs), res: jobguard.Result{Err: errGuardSilent}}
	if t.ended {
		t.res = job.Wait()
	}
	return t, nil
}

// releaseBudget bounds the release after the term. Once the lease is
// lost, releasing is only a courtesy, and must not keep dlock past the
// grace period on an unreachable backend.
func (t term) releaseBudget() time.Duration {
	if t.lost == nil {
		return releaseBudget
	}
	return min(max(time.Until(t.deadline), minLostBudget), releaseBudget/5)
}

// finishTerm releases the lease, closes the Locker and turns the term's
// end into dlock's exit.
func finishTerm(l *dlock.Locker, lease *dlock.Lease, opts *runOptions, std *IO, t term) error {
	relErr, timedOut := releaseAndClose(l, lease, t.releaseBudget())
	lost := t.lost
	if lost == nil && errors.Is(relErr, dlock.ErrLost) {
		lost = relErr
	}
	return runOutcome(opts, std, t.res, lost, relErr, timedOut)
}

// errGuardSilent: the guard did not report the end of the job after
// SIGKILL (it is stopped or starved); dlock exits without it, and the
// guard, on finding dlock gone, kills whatever is left.
var errGuardSilent = errors.New("the guard process did not report the end of the command")

func runOutcome(opts *runOptions, std *IO, res jobguard.Result, lost, relErr error, timedOut bool) error {
	if res.Err != nil && lost == nil {
		return fmt.Errorf("%w; lock %q released", res.Err, opts.Name)
	}
	code := exitCode(res.Status)
	if lost != nil && res.Err != nil {
		return exitWith(ExitLeaseLost, fmt.Errorf("lease on %q was lost while the command ran (%v); exiting %d",
			opts.Name, res.Err, ExitLeaseLost))
	}
	if lost != nil {
		return exitWith(ExitLeaseLost, fmt.Errorf("lease on %q was lost while the command ran (command exit status %d); exiting %d",
			opts.Name, code, ExitLeaseLost))
	}
	if relErr != nil && !timedOut {
		fmt.Fprintln(std.Err, errorLine(fmt.Errorf("warning: %w", relErr)))
	} else if timedOut {
		fmt.Fprintln(std.Err, errorLine(fmt.Errorf("warning: release %q: %w; the lease ends at its TTL", opts.Name, relErr)))
	}
	if code != 0 {
		return exitWith(code, nil)
	}
	return nil
}

// Budgets for releasing the lease and closing the Locker once the command
// has ended.
const (
	releaseBudget = 5 * time.Second
	minLostBudget = 100 * time.Millisecond
)

// releaseAndClose releases the lease and closes the Locker, giving up
// after budget (dlock exits at once after, so an abandoned call ends with
// the process). timedOut says the backend did not answer in time.
func releaseAndClose(l *dlock.Locker, lease *dlock.Lease, budget time.Duration) (relErr error, timedOut bool) {
	return within(budget, func() error {
		err := lease.Release(context.Background())
		_ = l.Close()
		return err
	})
}

// within runs f, giving up waiting for it after budget; the abandoned call
// runs on in the background.
func within(budget time.Duration, f func() error) (err error, timedOut bool) {
	done := make(chan error, 1)
	go func() { done <- f() }()
	t := time.NewTimer(budget)
	defer t.Stop()
	select {
	case err := <-done:
		return err, false
	case <-t.C:
		return fmt.Errorf("no answer from the backend within %s", budget), true
	}
}

// killWait bounds the wait for the guard's report after SIGKILL.
const killWait = time.Second

// watched is how watchChild ended.
type watched struct {
	lost      error     // the lease's loss, if it was lost while the job ran
	deadline  time.Time // the end of the grace period after the loss
	ended     bool      // false: the guard never reported the job's end
	signalled bool      // a signal to dlock was forwarded to the job
}

// watchChild waits for the job to end. It forwards signals, and on loss of
// the lease sends SIGTERM to the whole job, then SIGKILL after the grace,
// and gives up waiting for the guard killWait later.
func watchChild(job *jobguard.Job, lease *dlock.Lease, opts *runOptions, std *IO, sigs <-chan os.Signal) watched {
	var w watched
	done := lease.Done()
	var grace, stuck <-chan time.Time
	for {
		select {
		case <-job.Done():
			w.ended = true
			return w
		case s := <-sigs:
			w.signalled = true
			_ = job.Signal(s.(syscall.Signal))
		case <-done:
			done = nil
			if w.lost = lease.Err(); !errors.Is(w.lost, dlock.ErrLost) {
				w.lost = nil
				continue
			}
			w.deadline = time.Now().Add(opts.Grace)
			fmt.Fprintln(std.Err, errorLine(fmt.Errorf("%v; sending SIGTERM to the command (process group %d and every process it started)", w.lost, job.Pid())))
			_ = job.Signal(syscall.SIGTERM)
			grace = time.After(opts.Grace)
		case <-grace:
			grace = nil
			fmt.Fprintln(std.Err, errorLine(fmt.Errorf("command still running %s after SIGTERM; sending SIGKILL", opts.Grace)))
			job.Kill()
			stuck = time.After(killWait)
		case <-stuck:
			return w
		}
	}
}
