package demo

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

// WorkerOptions configures one demo worker process (WorkerCommand).
type WorkerOptions struct {
	Role  string // a key of the roles table
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
	// Permits, if positive, makes the worker's grant a permit of the
	// semaphore Name with that many permits; Election makes it a term of
	// the election Name.
	Permits  int
	Election bool
}

// WorkerCommand is the hidden dlock command that runs one worker process:
// `dlock __demo-worker ROLE [flags]`, with the flags of AddFlags. Run
// starts the workers by re-executing the dlock binary with it.
const WorkerCommand = "__demo-worker"

// AddFlags registers the worker's flags, with their defaults, on the
// command that runs the worker.
func (o *WorkerOptions) AddFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&o.Dir, "dir", "", "scenario directory")
	f.StringVar(&o.Label, "label", "W", "timeline label")
	f.StringVar(&o.Name, "name", "job", "lock name")
	f.DurationVar(&o.TTL, "ttl", time.Second, "lease TTL")
	f.DurationVar(&o.Hold, "hold", time.Second, "hold time")
	f.DurationVar(&o.Wait, "wait", 10*time.Second, "acquire wait")
	f.DurationVar(&o.Job, "job", 2*time.Second, "job length")
	f.IntVar(&o.N, "n", 10, "count")
	f.IntVar(&o.PauseAfter, "pause-after", -1, "freeze after this many items")
	f.StringVar(&o.Then, "then", "", "action after resuming")
	f.Int64Var(&o.Since, "since", 0, "reference unix ms")
	f.IntVar(&o.Permits, "permits", 0, "take a permit of a semaphore with this many permits")
	f.BoolVar(&o.Election, "election", false, "campaign in the election instead of taking a lock")
}

// urlEnv passes the backend URL to demo workers through their
// environment, readable only by the same user, never on their command line,
// which every user can read (ps): the URL may carry a password.
const urlEnv = "DLOCK_DEMO_WORKER_URL"

// worker is the running worker process.
type worker struct {
	opts   *WorkerOptions
	url    string // the backend, from urlEnv
	out    io.Writer
	res    *sql.DB
	locker *dlock.Locker
}

// RunWorker runs one worker process: the role opts names, on the backend
// whose URL the demo put in the worker's environment, printing its
// timeline lines on out.
func RunWorker(ctx context.Context, opts *WorkerOptions, out io.Writer) error {
	role, ok := roles[opts.Role]
	if !ok {
		return usageErr("unknown demo worker role %q", opts.Role)
	}
	w := &worker{opts: opts, url: os.Getenv(urlEnv), out: out}
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
	l, err := openLocker(ctx, w.url, dlock.WithOwner(w.owner()), dlock.WithTTL(w.opts.TTL))
	if err != nil {
		return nil, err
	}
	w.locker = l
	return l, nil
}

func (w *worker) owner() string { return fmt.Sprintf("demo %s (pid %d)", w.opts.Label, os.Getpid()) }

// acquire takes the worker's grant, waiting up to opts.Wait: the lock, a
// permit of the semaphore (opts.Permits) or a term of the election
// (opts.Election).
func (w *worker) acquire(ctx context.Context, opts ...dlock.Option) (*dlock.Lease, error) {
	l, err := w.lock(ctx)
	if err != nil {
		return nil, err
	}
	opts = append([]dlock.Option{dlock.WithWait(w.opts.Wait)}, opts...)
	switch {
	case w.opts.Election:
		e, err := l.Election(w.opts.Name)
		if err != nil {
			return nil, err
		}
		w.say("campaigning in %s", e)
		return e.Campaign(ctx, "", opts...)
	case w.opts.Permits > 0:
		s, err := l.Semaphore(w.opts.Name, w.opts.Permits)
		if err != nil {
			return nil, err
		}
		return s.Acquire(ctx, opts...)
	}
	return l.Acquire(ctx, w.opts.Name, opts...)
}

// granted describes a new lease on the timeline: "acquired fence 3", or
// "elected leader, term 3", or "acquired permit 1 of 2, fence 3".
func (w *worker) granted(ls *dlock.Lease) string {
	switch ls.Kind() {
	case dlock.KindLeader:
		return fmt.Sprintf("elected leader, term %d", ls.Fence())
	case dlock.KindPermit:
		return fmt.Sprintf("acquired permit %d of %d, fence %d", ls.Slot(), w.opts.Permits, ls.Fence())
	}
	return fmt.Sprintf("acquired fence %d", ls.Fence())
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

// work records an interval of work under fence f lasting d.
func (w *worker) work(ctx context.Context, f uint64, d time.Duration) error {
	start := nowMs()
	time.Sleep(d)
	_, err := w.res.ExecContext(ctx, `INSERT INTO work (proc, fence, started, ended) VALUES (?, ?, ?, ?)`,
		w.opts.Label, int64(f), start, nowMs())
	return err
}

// sleepUntil sleeps until the unix-millisecond time ms.
func sleepUntil(ms int64) { time.Sleep(time.Until(time.UnixMilli(ms))) }

// increment is the unprotected read-modify-write the lock must guard.
func (w *worker) increment(ctx context.Context) error {
	var v int
	if err := w.res.QueryRowContext(ctx, `SELECT value FROM counter WHERE id = 1`).Scan(&v); err != nil {
		return err
	}
	time.Sleep(100 * time.Microsecond) // the app's work between read and write
	_, err := w.res.ExecContext(ctx, `UPDATE counter SET value = ? WHERE id = 1`, v+1)
	return err
}
