package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/driver"
	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"
)

// runOptions configures `dlock run`.
type runOptions struct {
	URL     string
	Name    string
	Command []string
	// Wait bounds the wait for a held lock; 0 means one attempt.
	Wait time.Duration
	TTL  time.Duration
	// Grace is how long a command gets between SIGTERM and SIGKILL after
	// the lease was lost.
	Grace            time.Duration
	ConflictExitCode int
	Owner            string
	// Permits, when above 0, makes the command run under one permit of the
	// semaphore Name with that many permits instead of under the mutex.
	Permits int
	// Slots are the scheduled-job options (--once-per, --schedule, ...).
	Slots slotOptions
}

// runLong is the help of `dlock run`.
const runLong = `Run COMMAND while holding the lock NAME, like flock(1) across machines.

With --wait 0 (the default, right for a cron job duplicated on two hosts) dlock
makes one attempt; if the lock is held elsewhere it prints one line naming the
holder, its fence and its time left, and exits with --conflict-exit-code (75).
--wait 5m waits up to five minutes, --wait forever without a bound.

With --permits N, NAME is a semaphore: up to N commands run at once, each
under one of its N permits, and the rest wait (--wait) or exit 75 as above.
Every process must give the same N for a name.

The command runs in its own process group with DLOCK_NAME, DLOCK_FENCE and
DLOCK_TOKEN in its environment, so that it can fence its own writes; with
--permits also DLOCK_PERMIT, the permit's index (0 to N-1), whose fence
DLOCK_FENCE is.
DLOCK_URL is passed on only when it holds no password. The lease is refreshed
every TTL/3 while the command runs.

The job never outlives the lease. The job is the command and every process it
starts, including those that leave its process group (setsid, a double fork).
- If the lease is lost (the backend expired it, another holder took it, an
  admin force-released it, or no refresh could be confirmed in time), dlock
  says so on stderr and sends SIGTERM to the whole job, SIGKILL after --grace,
  and exits 76: at most --grace after the loss line (plus the milliseconds
  the kill takes, or a second if the guard process does not answer), whether
  or not the backend still answers.
- If dlock itself dies without a chance to clean up (kill -9, the OOM killer),
  the job is SIGKILLed within milliseconds, long before the lease can expire:
  the command runs under a small guard process (dlock re-executed) that is a
  child subreaper, so that orphans of the job stay below it, and that watches
  a pipe whose only write end dlock holds; the pipe's end is dlock's death.
- If the guard is killed, dlock (a subreaper too) kills the job and exits 1.
- When the command exits, processes it left running get SIGTERM, SIGKILL after
  --grace, before the lock is released.
Limits: processes the job hands to something outside it are not followed (a
system service asked to start them: systemd-run, at, a container runtime,
ssh). Processes running as another user (sudo, setuid programs) can be
signalled only when dlock runs as root. If dlock and its guard are SIGKILLed
at the same instant, only the parent-death signal is left, which reaches the
command but not its children. A fork bomb can outrun the kill loop, which
gives up after 5s. For a hard boundary, run dlock in its own cgroup:
systemd-run --scope dlock run ...

SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to dlock are forwarded to the whole
job; the lock is released once the job has ended, and dlock exits with the
command's exit code (128+N when killed by signal N). A command that cannot be
found exits 127, one that cannot be executed 126, as in a shell.

The command runs in a background process group, so it cannot read from the
terminal; stdin is still passed through for pipes and files.`

func newRunCmd(g *globalOptions, std *IO) *cobra.Command {
	opts := &runOptions{}
	cmd := &cobra.Command{
		Use:   "run [flags] NAME -- COMMAND [ARGS...]",
		Short: "Run a command while holding a lock",
		Long:  runLong + slotHelp,
		Example: `  dlock run --schedule '0 2 * * *' nightly-report -- ./report.sh
  dlock run --once-per 1h --retry-crashed hourly-sync -- ./sync.sh
  dlock run nightly-report -- ./report.sh
  dlock run --wait 5m --ttl 1m backup -- pg_dump -f /backups/db.sql mydb
  dlock run --permits 4 --wait forever transcode -- ./transcode.sh`,
		Args: args(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			opts.setArgs(g.URL, a)
			return runRun(cmd.Context(), opts, std)
		},
	}
	addRunFlags(cmd, opts)
	return cmd
}

// setArgs takes the backend and the operands: NAME [--] COMMAND [ARGS...].
func (o *runOptions) setArgs(url string, a []string) {
	o.URL = url
	o.Name, o.Command = a[0], a[1:]
	if len(o.Command) > 0 && o.Command[0] == "--" {
		o.Command = o.Command[1:]
	}
}

// addRunFlags registers the flags of `dlock run`.
func addRunFlags(cmd *cobra.Command, opts *runOptions) {
	addJobFlags(cmd, opts)
	f := cmd.Flags()
	f.Var(waitFlag{&opts.Wait}, "wait", `how long to wait for a held lock (0: one attempt; "forever": no bound)`)
	f.IntVar(&opts.ConflictExitCode, "conflict-exit-code", ExitHeld, "exit code when the lock is held elsewhere")
	f.Var(permitsFlag{&opts.Permits}, "permits", fmt.Sprintf("NAME is a semaphore of this many permits (1 to %d); run under one of them", dlock.MaxPermits))
	addSlotFlags(cmd, &opts.Slots)
}

// addJobFlags registers the flags of every command that runs a job under a
// lease (run, elect); the job's operands follow them.
func addJobFlags(cmd *cobra.Command, opts *runOptions) {
	f := cmd.Flags()
	f.SetInterspersed(false)
	durationVar(f, &opts.TTL, "ttl", dlock.DefaultTTL, "lease length; refreshed every ttl/3 while the command runs")
	durationVar(f, &opts.Grace, "grace", 10*time.Second, "time between SIGTERM and SIGKILL when the lease is lost")
	f.StringVar(&opts.Owner, "owner", "", `holder description others see (default "host/pid")`)
}

// permitsFlag is --permits: a permit count, refused below 1 when given.
type permitsFlag struct{ n *int }

func (p permitsFlag) String() string {
	if p.n == nil || *p.n == 0 {
		return ""
	}
	return strconv.Itoa(*p.n)
}

func (p permitsFlag) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > dlock.MaxPermits {
		return fmt.Errorf("%q is not a permit count from 1 to %d", s, dlock.MaxPermits)
	}
	*p.n = n
	return nil
}

func (p permitsFlag) Type() string { return "int" }

// runUse is the synopsis of `dlock run` that usage errors repeat.
const runUse = "dlock run [flags] NAME -- COMMAND [ARGS...]"

// validate checks the options; use is the command's synopsis.
func (o *runOptions) validate(use string) error {
	switch {
	case checkName(o.Name) != nil:
		return usageErr("%v (usage: %s)", checkName(o.Name), use)
	case len(o.Command) == 0:
		return usageErr("no command to run (usage: %s)", use)
	case o.TTL <= 0:
		return usageErr("--ttl %s is not positive (the lease length, e.g. --ttl 30s)", o.TTL)
	case o.Wait < 0:
		return usageErr("--wait %s is negative", o.Wait)
	case o.Grace < 0:
		return usageErr("--grace %s is negative", o.Grace)
	case o.ConflictExitCode < 0 || o.ConflictExitCode > 255:
		return usageErr("--conflict-exit-code %d is not in 0..255", o.ConflictExitCode)
	case o.Permits < 0 || o.Permits > dlock.MaxPermits:
		return usageErr("--permits %d is not a permit count from 1 to %d", o.Permits, dlock.MaxPermits)
	}
	return o.Slots.validate(o.Permits)
}

func (o *runOptions) lockOptions() []dlock.Option {
	opts := []dlock.Option{dlock.WithTTL(o.TTL), dlock.WithWait(o.Wait)}
	if o.Owner != "" {
		opts = append(opts, dlock.WithOwner(o.Owner))
	}
	return opts
}

// grant takes what the command runs under: the lock, a permit or a term.
type grant struct {
	kind    dlock.Kind
	acquire func(ctx context.Context) (*dlock.Lease, error)
}

// grant is the mutex Name, or with Permits one permit of the semaphore.
func (o *runOptions) grant(l *dlock.Locker) (grant, error) {
	if o.Permits == 0 {
		return grant{dlock.KindMutex, func(ctx context.Context) (*dlock.Lease, error) {
			if err := notAPrimitive(ctx, l, o.Name); err != nil {
				return nil, err
			}
			return l.Acquire(ctx, o.Name, o.lockOptions()...)
		}}, nil
	}
	sem, err := l.Semaphore(o.Name, o.Permits, o.lockOptions()...)
	if err != nil {
		return grant{}, acquireError(o, err, nil)
	}
	return grant{dlock.KindPermit, func(ctx context.Context) (*dlock.Lease, error) {
		return sem.Acquire(ctx)
	}}, nil
}

// runRun acquires the lock, runs the command under it and releases it.
func runRun(ctx context.Context, opts *runOptions, std *IO) error {
	if err := opts.validate(runUse); err != nil {
		return err
	}
	return withJob(ctx, opts, func(l *dlock.Locker, sigs <-chan os.Signal) error {
		started := time.Now()
		slot, slotted, err := opts.Slots.slot(started)
		if err != nil {
			_ = l.Close()
			return usageErr("%v", err)
		}
		g, err := opts.grant(l)
		if err != nil {
			_ = l.Close()
			return err
		}
		lease, err := acquireForRun(ctx, l, opts, g, std, sigs)
		if err != nil {
			if slotted && errors.Is(err, dlock.ErrNotAcquired) {
				if serr := slotOfHeld(ctx, l, opts, slot); serr != nil {
					err = serr
				}
			}
			_ = l.Close()
			return err
		}
		var run *dlock.Run
		if slotted {
			if run, err = claimSlot(ctx, l, lease, opts, slot); err != nil {
				_, _ = releaseAndClose(l, lease, releaseBudget)
				return err
			}
		}
		return superviseCommand(l, lease, opts, std, sigs, func(t term) { afterJob(l, lease, opts, run, t, started, sigs) })
	})
}

// withJob finds the command, catches the signals to forward to it and
// opens the backend, then calls f, which must close the Locker.
func withJob(ctx context.Context, opts *runOptions, f func(l *dlock.Locker, sigs <-chan os.Signal) error) error {
	if err := checkCommand(opts.Command[0]); err != nil {
		return err
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(sigs)
	l, err := openLocker(ctx, opts.URL)
	if err != nil {
		return err
	}
	return f(l, sigs)
}

// acquireForRun takes g; a signal while waiting gives up the wait.
func acquireForRun(ctx context.Context, l *dlock.Locker, opts *runOptions, g grant, std *IO, sigs <-chan os.Signal) (*dlock.Lease, error) {
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case s := <-sigs:
			cancel(signalError{s.(syscall.Signal)})
		case <-sctx.Done():
		}
	}()
	wctx := sctx
	if opts.Wait < maxBoundedWait {
		var tcancel context.CancelFunc
		wctx, tcancel = context.WithTimeoutCause(sctx, opts.Wait+backendTimeout, errBackendSilent)
		defer tcancel()
	}
	if std.ErrTTY && opts.Wait > 0 {
		stop := showWaiting(wctx, l, opts.Name, g.kind, std.Err)
		defer stop()
	}
	lease, err := g.acquire(wctx)
	if err == nil {
		return lease, nil
	}
	return nil, acquireError(opts, err, context.Cause(wctx))
}

// maxBoundedWait: waits longer than this get no backend-silence bound.
const maxBoundedWait = 100 * 365 * 24 * time.Hour

// errBackendSilent is the cause of an acquire given up because the backend
// did not answer.
var errBackendSilent = fmt.Errorf("no answer from the backend within %s", backendTimeout)

func acquireError(opts *runOptions, err, cause error) error {
	var sig signalError
	if errors.As(cause, &sig) {
		return exitWith(128+int(sig.s), fmt.Errorf("interrupted by %s while waiting for %q", unix.SignalName(sig.s), opts.Name))
	}
	if errors.Is(cause, errBackendSilent) {
		return fmt.Errorf("acquire %q: %w", opts.Name, errBackendSilent)
	}
	if errors.Is(err, dlock.ErrInvalidArgument) {
		// The URL was parsed when the Locker was opened: what is left is
		// the name, --ttl, --wait or --owner, all given on the command line.
		return exitWith(ExitUsage, err)
	}
	var held *dlock.HeldError
	if errors.As(err, &held) {
		return exitWith(opts.ConflictExitCode, fmt.Errorf("%s; not running the command (exit %d)",
			heldLine(opts, held.Holder), opts.ConflictExitCode))
	}
	return err
}

// heldLine says that the lock, or every permit, is held, and by whom.
func heldLine(opts *runOptions, h dlock.Holder) string {
	held, by := "held", " by "
	if opts.Wait > 0 {
		held, by = fmt.Sprintf("still held after waiting %s", opts.Wait), ", by "
	}
	if opts.Permits > 0 {
		return fmt.Sprintf("all %d permits of %q are %s, one by %s", opts.Permits, opts.Name, held, h.String())
	}
	return fmt.Sprintf("%q is %s%s%s", opts.Name, held, by, h.String())
}

// signalError is the cause of a wait given up because of a signal.
type signalError struct{ s syscall.Signal }

func (e signalError) Error() string { return "interrupted by " + unix.SignalName(e.s) }

// waitFlag is --wait: a duration, or "forever" (dlock.Forever).
type waitFlag struct{ d *time.Duration }

func (w waitFlag) String() string {
	if w.d != nil && *w.d == dlock.Forever {
		return "forever"
	}
	if w.d == nil {
		return "0s"
	}
	return w.d.String()
}

func (w waitFlag) Set(s string) error {
	if s == "forever" {
		*w.d = dlock.Forever
		return nil
	}
	d, err := driver.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("%w; for no bound say forever", err)
	}
	*w.d = d
	return nil
}

func (w waitFlag) Type() string { return "duration" }

// notAPrimitive refuses to run under the mutex name while name is held as
// a semaphore, read-write lock or election (the library's Acquire does not
// look, to spare every acquire a listing; one per run is cheap). A backend
// that cannot list is not checked.
func notAPrimitive(ctx context.Context, l *dlock.Locker, name string) error {
	hs, err := l.List(ctx, name)
	if err != nil {
		if errors.Is(err, dlock.ErrUnsupported) {
			return nil
		}
		return err
	}
	for _, h := range hs {
		if h.Name == name && h.Kind != dlock.KindMutex {
			return &dlock.KindError{Name: name, Held: h.Kind, HeldPermits: h.Permits, Holder: h, Wanted: dlock.KindMutex}
		}
	}
	return nil
}
