package jobguard

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Spec describes a job to run under a guard.
type Spec struct {
	// Argv is the command and its arguments; Argv[0] is looked up in the
	// PATH of Env.
	Argv []string
	// Env is the command's environment.
	Env []string
	// Stdin, Stdout and Stderr are the command's standard streams, as in
	// exec.Cmd (an *os.File is passed through as is).
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Grace is how long processes the command leaves behind when it exits
	// get between SIGTERM and SIGKILL.
	Grace time.Duration
	// Guard is the executable started as the guard; "" means
	// /proc/self/exe, this very program, whose main must call Main when
	// IsGuard (see IsGuard).
	Guard string
}

// Job is a command running under a guard process.
type Job struct {
	guard *exec.Cmd
	ctrl  *os.File
	pid   int
	done  chan struct{}
	res   Result
}

// Result is how a job ended.
type Result struct {
	// Status is the command's own wait status (valid when Err is nil).
	Status syscall.WaitStatus
	// Left is how many processes the command left running when it exited;
	// the guard sent them SIGTERM, then SIGKILL after the grace.
	Left int
	// Err is set when the guard died before it could report the end of the
	// command (it was killed); the caller's process then killed the job
	// itself.
	Err error
}

// StartError is a command that could not be started. It unwraps to its
// errno: ENOENT for a command not found, EACCES or ENOEXEC for one that
// cannot be executed.
type StartError struct {
	Command string
	Errno   syscall.Errno
	Msg     string
}

func (e *StartError) Error() string { return e.Msg }

// Unwrap returns the errno.
func (e *StartError) Unwrap() error { return e.Errno }

// Start starts the guard, which starts the command in a new process group
// and reports its pid; Start returns once the command runs (or failed to
// start, a *StartError).
func Start(s Spec) (*Job, error) {
	if len(s.Argv) == 0 {
		return nil, errors.New("jobguard: empty command")
	}
	// os.Pipe sets O_CLOEXEC: the write end of the control pipe exists in
	// this process only, so its EOF in the guard means this process died.
	ctrlR, ctrlW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	statR, statW, err := os.Pipe()
	if err != nil {
		closeAll(ctrlR, ctrlW)
		return nil, err
	}
	cmd := guardCmd(s, ctrlR, statW)
	err = cmd.Start()
	closeAll(ctrlR, statW)
	if err != nil {
		closeAll(ctrlW, statR)
		return nil, fmt.Errorf("jobguard: start the guard process: %w", err)
	}
	j := &Job{guard: cmd, ctrl: ctrlW, done: make(chan struct{})}
	br := bufio.NewReader(statR)
	if err := j.started(br, s.Argv[0]); err != nil {
		ctrlW.Close()
		statR.Close()
		_ = cmd.Wait()
		return nil, err
	}
	go j.watch(br, statR)
	return j, nil
}

func guardCmd(s Spec, ctrlR, statW *os.File) *exec.Cmd {
	path := s.Guard
	if path == "" {
		path = "/proc/self/exe"
	}
	cmd := exec.Command(path, append([]string{"--"}, s.Argv...)...)
	cmd.Args[0] = "dlock-jobguard"
	cmd.Env = append(withoutMarker(s.Env), fmt.Sprintf("%s=1;grace=%s", envMarker, s.Grace))
	cmd.Stdin, cmd.Stdout, cmd.Stderr = s.Stdin, s.Stdout, s.Stderr
	cmd.ExtraFiles = []*os.File{ctrlR, statW} // fds 3 and 4
	// Own process group: a kill of dlock's group (kill -9 %1 in a shell)
	// spares the guard, which then kills the job. Pdeathsig: a second
	// wake-up beside the control pipe's EOF.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	// Copying a non-file stream ends when the last holder of the pipe dies;
	// bound it in case some process of the job escaped.
	cmd.WaitDelay = time.Second
	return cmd
}

func closeAll(fs ...*os.File) {
	for _, f := range fs {
		_ = f.Close()
	}
}

// started reads the guard's first line: the command's pid, or why it could
// not start.
func (j *Job) started(br *bufio.Reader, command string) error {
	line, err := br.ReadString('\n')
	verb, rest, _ := strings.Cut(strings.TrimSpace(line), " ")
	switch {
	case err != nil:
		return fmt.Errorf("jobguard: the guard process exited before starting %s", command)
	case verb == "pid":
		j.pid, err = strconv.Atoi(rest)
		return err
	case verb == "error":
		num, msg, _ := strings.Cut(rest, " ")
		n, _ := strconv.Atoi(num)
		return &StartError{Command: command, Errno: syscall.Errno(n), Msg: msg}
	}
	return fmt.Errorf("jobguard: unexpected line from the guard: %q", line)
}

// watch reads the guard's reports until it exits. A guard that exits
// without reporting the command's end was killed: the job is killed here.
func (j *Job) watch(br *bufio.Reader, statR *os.File) {
	defer close(j.done)
	defer statR.Close()
	ended := false
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			break
		}
		verb, rest, _ := strings.Cut(strings.TrimSpace(line), " ")
		n, _ := strconv.ParseUint(rest, 10, 32)
		switch verb {
		case "left":
			j.res.Left = int(n)
		case "exit":
			j.res.Status, ended = syscall.WaitStatus(n), true
		}
	}
	if !ended {
		killErr := j.killOrphaned()
		_ = j.guard.Wait()
		j.res.Err = fmt.Errorf("the guard process (pid %d) died (%s) while the command (pid %d) ran; the command was killed",
			j.guard.Process.Pid, j.guard.ProcessState, j.pid)
		if killErr != nil {
			j.res.Err = fmt.Errorf("%w; but killing it failed: %v", j.res.Err, killErr)
		}
		return
	}
	_ = j.guard.Wait()
}

// killOrphaned kills the job after its guard died. When this process is a
// child subreaper the job's orphans were re-parented here, and every
// descendant but the guard is killed; otherwise the job's process group.
// The killed processes that became our children are reaped.
func (j *Job) killOrphaned() error {
	self := os.Getpid()
	t := tree{root: self, descendants: isSubreaper(), pgid: j.pid, exclude: j.guard.Process.Pid}
	ms, _ := t.members()
	err := t.kill(killLimit)
	for _, p := range ms {
		if p.ppid == self {
			var ws syscall.WaitStatus
			_, _ = syscall.Wait4(p.pid, &ws, syscall.WNOHANG, nil)
		}
	}
	return err
}

// Pid returns the command's pid, which is also its process group's id.
func (j *Job) Pid() int { return j.pid }

// GuardPid returns the guard process's pid.
func (j *Job) GuardPid() int { return j.guard.Process.Pid }

// Signal has the guard send s to every process of the job: its process
// group and the processes that left it (setsid, double fork). SIGKILL is
// repeated until none is left.
func (j *Job) Signal(s syscall.Signal) error {
	if s <= 0 || s > 255 {
		return fmt.Errorf("jobguard: signal %d out of range", s)
	}
	_, err := j.ctrl.Write([]byte{byte(s)})
	return err
}

// Kill has the guard SIGKILL the whole job, and kills the guard's
// descendants from this process too, so that the job dies even if the
// guard is stopped or starved. It returns once no process of the job is
// left alive, or after a second.
func (j *Job) Kill() {
	_ = j.Signal(syscall.SIGKILL)
	select {
	case <-j.done: // the guard is reaped: its pid may be reused
		return
	default:
	}
	t := tree{root: j.guard.Process.Pid, descendants: true, pgid: j.pid}
	_ = t.kill(time.Second)
}

// Done is closed when the job has ended and the guard has exited.
func (j *Job) Done() <-chan struct{} { return j.done }

// Wait waits for the end of the job (the command, every process it left
// behind, and the guard) and returns how it ended.
func (j *Job) Wait() Result {
	<-j.done
	_ = j.ctrl.Close()
	return j.res
}
