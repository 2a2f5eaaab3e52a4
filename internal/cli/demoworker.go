package cli

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"runtime"
	"syscall"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/spf13/cobra"
)

// workerOptions configures one demo worker process (`dlock __demo-worker`).
type workerOptions struct {
	Role  string
	URL   string
	Dir   string // the scenario's directory: resource.db, naive.db
	Label string // A, B, ... as printed on the timeline
	Name  string // the lock name
	TTL   time.Duration
	Hold  time.Duration // how long to hold the lock / keep working
	Wait  time.Duration // how long to wait for the lock
	Job   time.Duration // length of a long job or of probing
	N     int           // increments, subscriptions, ...
	// PauseAfter makes billing workers freeze after that many charges.
	PauseAfter int
	// Then is what a paused holder does on resume: write, fenced-write, release.
	Then string
	// Since is a unix-millisecond reference time (when a holder was killed).
	Since int64
}

func newDemoWorkerCmd(io *IO) *cobra.Command {
	opts := &workerOptions{}
	cmd := &cobra.Command{
		Use:    "__demo-worker ROLE",
		Short:  "internal: one process of a demo scenario",
		Hidden: true,
		Args:   args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			opts.Role = a[0]
			if opts.URL == "" {
				opts.URL = os.Getenv(demoURLEnv)
			}
			return runDemoWorker(cmd.Context(), opts, io)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Dir, "dir", "", "scenario directory")
	f.StringVar(&opts.Label, "label", "W", "timeline label")
	f.StringVar(&opts.Name, "name", "job", "lock name")
	f.DurationVar(&opts.TTL, "ttl", time.Second, "lease TTL")
	f.DurationVar(&opts.Hold, "hold", time.Second, "hold time")
	f.DurationVar(&opts.Wait, "wait", 10*time.Second, "acquire wait")
	f.DurationVar(&opts.Job, "job", 2*time.Second, "job length")
	f.IntVar(&opts.N, "n", 10, "count")
	f.IntVar(&opts.PauseAfter, "pause-after", -1, "freeze after this many items")
	f.StringVar(&opts.Then, "then", "", "action after resuming")
	f.Int64Var(&opts.Since, "since", 0, "reference unix ms")
	cmd.Flags().StringVar(&opts.URL, "url", "", "backend URL (default: $"+demoURLEnv+")")
	return cmd
}

// demoURLEnv passes the backend URL to demo workers through their
// environment, readable only by the same user, never on their command line,
// which every user can read (ps): the URL may carry a password.
const demoURLEnv = "DLOCK_DEMO_WORKER_URL"

// worker is the running worker process.
type worker struct {
	opts   *workerOptions
	out    io.Writer
	res    *sql.DB
	locker *dlock.Locker
}

// workerRoles maps a role to its behaviour.
var workerRoles = map[string]func(context.Context, *worker) error{}

func runDemoWorker(ctx context.Context, opts *workerOptions, io *IO) error {
	role, ok := workerRoles[opts.Role]
	if !ok {
		return usageErr("unknown demo worker role %q", opts.Role)
	}
	w := &worker{opts: opts, out: io.Out}
	defer w.close()
	var err error
	if w.res, err = openResource(opts.Dir); err != nil {
		return err
	}
	return role(ctx, w)
}

func (w *worker) close() {
	if w.locker != nil {
		w.locker.Close()
	}
	if w.res != nil {
		w.res.Close()
	}
}

func (w *worker) say(format string, args ...any) { fmt.Fprintf(w.out, format+"\n", args...) }

// lock opens the worker's Locker on first use.
func (w *worker) lock(ctx context.Context) (*dlock.Locker, error) {
	if w.locker != nil {
		return w.locker, nil
	}
	l, err := openLocker(ctx, w.opts.URL, dlock.WithOwner(w.owner()), dlock.WithTTL(w.opts.TTL))
	if err != nil {
		return nil, err
	}
	w.locker = l
	return l, nil
}

func (w *worker) owner() string { return fmt.Sprintf("demo %s (pid %d)", w.opts.Label, os.Getpid()) }

// acquire takes the worker's lock, waiting up to opts.Wait.
func (w *worker) acquire(ctx context.Context, opts ...dlock.Option) (*dlock.Lease, error) {
	l, err := w.lock(ctx)
	if err != nil {
		return nil, err
	}
	return l.Acquire(ctx, w.opts.Name, append([]dlock.Option{dlock.WithWait(w.opts.Wait)}, opts...)...)
}

// freeze stops this process (SIGSTOP to itself), as a long GC pause or a
// throttled container would; the demo driver sends SIGCONT later.
func (w *worker) freeze() {
	w.say("freezing (SIGSTOP to myself, like a GC pause longer than the TTL)")
	t := time.Now()
	stopSelf()
	w.say("resumed after %s frozen; nothing told me anything happened", time.Since(t).Round(10*time.Millisecond))
}

// stopSelf stops the whole process with SIGSTOP sent to the calling thread,
// so that the stop takes effect before the call returns (a signal sent to
// the process may be handled by another thread while this one runs on).
func stopSelf() {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	_ = syscall.Tgkill(os.Getpid(), syscall.Gettid(), syscall.SIGSTOP)
	time.Sleep(10 * time.Millisecond)
}
