package jobguard

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// envMarker in a process's environment makes it a guard (see IsGuard). Its
// value carries the guard's settings: "1;grace=DURATION".
const envMarker = "DLOCK_JOBGUARD"

// The guard's inherited descriptors: the control pipe's read end (dlock
// holds the only write end) and the status pipe's write end.
const (
	ctrlFD   = 3
	statusFD = 4
)

// killLimit bounds one kill loop: far longer than killing a real process
// tree takes (milliseconds), short enough that a fork bomb cannot hold the
// guard forever.
const killLimit = 5 * time.Second

// IsGuard reports whether this process was started by Start to be a guard.
// A program that calls Start must begin its main with
//
//	if jobguard.IsGuard() { os.Exit(jobguard.Main()) }
func IsGuard() bool {
	_, ok := os.LookupEnv(envMarker)
	return ok
}

// Main runs this process as the guard of one job and returns its exit
// code: 0 once the job has ended and been reported, 125 when the process
// was not started by Start.
func Main() int {
	g, err := newGuard()
	if err != nil {
		fmt.Fprintf(os.Stderr, "dlock: job guard: %v (%s is set, but this process was not started as a guard by dlock run; unset it)\n", err, envMarker)
		return 125
	}
	return g.run()
}

// guard starts the command and keeps it from outliving dlock.
type guard struct {
	ppid   int
	grace  time.Duration
	argv   []string
	env    []string
	ctrl   *os.File
	status *os.File
	job    tree
	sigs   chan os.Signal
}

func newGuard() (*guard, error) {
	grace, err := parseMarker(os.Getenv(envMarker))
	if err != nil {
		return nil, err
	}
	if len(os.Args) < 3 || os.Args[1] != "--" {
		return nil, fmt.Errorf("arguments %q: want -- COMMAND [ARGS...]", os.Args[1:])
	}
	for _, fd := range []int{ctrlFD, statusFD} {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO {
			return nil, fmt.Errorf("descriptor %d is not a pipe", fd)
		}
		// Neither pipe may leak into the job: a job holding the status
		// pipe would hide the guard's death, the control pipe dlock's.
		unix.CloseOnExec(fd)
	}
	g := &guard{
		ppid: os.Getppid(), grace: grace, argv: os.Args[2:], env: withoutMarker(os.Environ()),
		ctrl: os.NewFile(ctrlFD, "jobguard-ctrl"), status: os.NewFile(statusFD, "jobguard-status"),
		sigs: make(chan os.Signal, 8),
	}
	// SIGTERM is also the parent-death signal (a second wake-up beside the
	// control pipe). Handled, not ignored: an ignored disposition would be
	// inherited by the job.
	signal.Notify(g.sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT)
	if err := BecomeSubreaper(); err != nil {
		return nil, fmt.Errorf("become a child subreaper: %w", err)
	}
	return g, nil
}

func parseMarker(v string) (time.Duration, error) {
	version, rest, _ := strings.Cut(v, ";")
	gs, ok := strings.CutPrefix(rest, "grace=")
	if version != "1" || !ok {
		return 0, fmt.Errorf("%s=%q: want 1;grace=DURATION", envMarker, v)
	}
	return time.ParseDuration(gs)
}

func withoutMarker(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, envMarker+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// report sends one status line to dlock; if dlock is gone nobody reads it.
func (g *guard) report(format string, a ...any) {
	_, _ = fmt.Fprintf(g.status, format+"\n", a...)
}

// start starts the command in its own process group. Pdeathsig SIGKILL is
// a last resort for the command itself should the guard be killed too.
func (g *guard) start() (int, error) {
	cmd := exec.Command(g.argv[0], g.argv[1:]...)
	cmd.Env = g.env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	// Never cmd.Wait: the reaper collects every child with wait4(-1).
	return cmd.Process.Pid, nil
}

func (g *guard) run() int {
	pid, err := g.start()
	if err != nil {
		g.report("error %d %s", errnoOf(err), oneLine(err))
		return 0
	}
	g.job = tree{root: os.Getpid(), descendants: true, pgid: pid}
	g.report("pid %d", pid)
	mainExit, gone := reap(pid)
	ctrl := readCtrl(g.ctrl)
	var grace <-chan time.Time
	var status *unix.WaitStatus
	for {
		select {
		case b, ok := <-ctrl:
			if !ok {
				return g.abandoned()
			}
			g.signal(syscall.Signal(b))
		case <-g.sigs:
			if os.Getppid() != g.ppid {
				return g.abandoned()
			}
		case ws := <-mainExit:
			status = &ws
			if n, _ := g.job.signal(syscall.SIGTERM); n > 0 {
				g.report("left %d", n)
				grace = time.After(g.grace)
			}
		case <-grace:
			_ = g.job.kill(killLimit)
		case <-gone:
			if status == nil {
				ws := <-mainExit
				status = &ws
			}
			g.report("exit %d", uint32(*status))
			return 0
		}
	}
}

func (g *guard) signal(s syscall.Signal) {
	if s == syscall.SIGKILL {
		_ = g.job.kill(killLimit)
		return
	}
	_, _ = g.job.signal(s)
}

// abandoned: dlock is gone, so the lease is no longer refreshed. Kill the
// whole job, give the reaper a moment to collect it, and exit.
func (g *guard) abandoned() int {
	_ = g.job.kill(killLimit)
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		var ws unix.WaitStatus
		if _, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil); errors.Is(err, unix.ECHILD) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	return 0
}

// reap collects every child of the guard (the command and the orphans
// re-parented to it). mainExit receives the command's status; gone is
// closed once the guard has no child left, that is, once the whole job
// has ended (a living descendant would have a living ancestor below the
// guard, or be the guard's child).
func reap(main int) (mainExit chan unix.WaitStatus, gone chan struct{}) {
	mainExit, gone = make(chan unix.WaitStatus, 1), make(chan struct{})
	go func() {
		defer close(gone)
		for {
			var ws unix.WaitStatus
			pid, err := unix.Wait4(-1, &ws, 0, nil)
			switch {
			case errors.Is(err, unix.EINTR):
			case err != nil:
				return
			case pid == main:
				mainExit <- ws
			}
		}
	}()
	return mainExit, gone
}

// readCtrl delivers each byte dlock writes (a signal number for the job);
// it is closed at EOF, when dlock has exited, however it died.
func readCtrl(f *os.File) <-chan byte {
	c := make(chan byte)
	go func() {
		defer close(c)
		buf := make([]byte, 64)
		for {
			n, err := f.Read(buf)
			for _, b := range buf[:n] {
				c <- b
			}
			if err != nil { // io.EOF: every write end is closed
				return
			}
		}
	}()
	return c
}

// errnoOf finds the errno behind a failed start: ENOENT for a command not
// found in PATH, EACCES for one that is not executable, and so on.
func errnoOf(err error) syscall.Errno {
	var errno syscall.Errno
	switch {
	case errors.As(err, &errno):
		return errno
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, os.ErrNotExist):
		return syscall.ENOENT
	case errors.Is(err, os.ErrPermission):
		return syscall.EACCES
	}
	return syscall.EINVAL
}

func oneLine(err error) string { return strings.Join(strings.Fields(err.Error()), " ") }
