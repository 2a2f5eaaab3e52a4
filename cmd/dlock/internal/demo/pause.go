package demo

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/dlockdev/dlock"
)

// runPause: A's lease expires while A is frozen; B takes the lock and
// writes; A resumes and writes too, unfenced: both wrote, A's stale value wins.
func runPause(ctx context.Context, e *env) (string, bool, error) {
	log, err := e.pauseAndWrite(ctx, "write")
	if err != nil {
		return "", false, err
	}
	value, _, err := registerValue(ctx, e.res, reportKey)
	if err != nil {
		return "", false, err
	}
	if !staleWrite(log, true) {
		return fmt.Sprintf("expected B then A to write, got %v", log), false, nil
	}
	return fmt.Sprintf("both wrote: B (fence %d) and then A (fence %d), who still believed it held the lock; the report now holds A's stale %q — mutual exclusion violated, the lock alone cannot prevent it",
		log[0].fence, log[1].fence, value), true, nil
}

// staleWrite reports whether log is B's accepted write followed by
// paused A's, accepted as given.
func staleWrite(log []writeAttempt, accepted bool) bool {
	return len(log) == 2 && log[0].proc == "B" && log[0].accepted && log[1].proc == "A" && log[1].accepted == accepted
}

// pauseAndWrite runs the pause choreography on a lock and returns the
// writes log (see pausedWriter); once A froze, B waits for its lease to
// expire.
func (e *env) pauseAndWrite(ctx context.Context, then string) ([]writeAttempt, error) {
	if _, err := e.resource(""); err != nil {
		return nil, err
	}
	name := e.lockName("report")
	expired := func(a *proc) error { return e.waitExpiry(ctx, a, name) }
	return e.pausedWriter(ctx, "", expired, "--name", name, "--then", then)
}

// pausedWriter: A takes its grant (args say which) with the watchdog off
// and freezes; after expired(A), B takes it and writes (then) and holds
// on; A is resumed and writes (then). It returns the writes log of the
// resource in the scenario's directory sub.
func (e *env) pausedWriter(ctx context.Context, sub string, expired func(*proc) error, args ...string) ([]writeAttempt, error) {
	a, err := e.spawn(sub, "A", "pause-holder", args...)
	if err != nil {
		return nil, err
	}
	if err := expired(a); err != nil {
		return nil, err
	}
	b, err := e.spawn(sub, "B", "writer", append(args, "--hold", e.ttl.String(), "--wait", (3*e.ttl+10*time.Second).String())...)
	if err != nil {
		return nil, err
	}
	if err := b.waitFor(ctx, "wrote", 10*time.Second+3*e.ttl); err != nil {
		return nil, err
	}
	e.say("--", "SIGCONT A")
	a.signal(syscall.SIGCONT)
	if err := e.waitAll(ctx, []*proc{a, b}, time.Minute); err != nil {
		return nil, err
	}
	return writeLog(ctx, e.res)
}

// rolePauseHolder acquires without the watchdog, freezes past its TTL,
// and on resume does opts.Then as if it still held the lock.
func rolePauseHolder(ctx context.Context, w *worker) error {
	lease, err := w.acquire(ctx, dlock.WithAutoRefresh(false))
	if err != nil {
		return err
	}
	w.say("%s (TTL %s, watchdog off)", w.granted(lease), lease.TTL())
	w.freeze()
	defer lease.Release(context.Background())
	return w.act(ctx, lease)
}

// roleWriter acquires (waiting), does opts.Then, holds, and releases.
func roleWriter(ctx context.Context, w *worker) error {
	lease, err := w.acquire(ctx)
	if err != nil {
		return err
	}
	w.say("%s", w.granted(lease))
	if err := w.act(ctx, lease); err != nil {
		return err
	}
	time.Sleep(w.opts.Hold)
	if err := lease.Release(context.Background()); err != nil {
		w.say("release: %v", err)
		return err
	}
	w.say("released normally: my lock was never touched")
	return nil
}

// act does what opts.Then says, under lease. A leader writes the
// register's row named after its election, others the report.
func (w *worker) act(ctx context.Context, lease *dlock.Lease) error {
	key, value := reportKey, "report by "+w.opts.Label
	if w.opts.Election {
		key, value = w.opts.Name, "config by leader "+w.opts.Label
	}
	switch w.opts.Then {
	case "write":
		return w.plainWrite(ctx, key, lease.Fence(), value)
	case "fenced-write":
		return w.fencedWrite(ctx, key, lease.Fence(), value)
	case "release":
		return w.tokenRelease(lease)
	case "":
		return nil
	}
	return fmt.Errorf("unknown action %q", w.opts.Then)
}

func (w *worker) plainWrite(ctx context.Context, key string, f uint64, value string) error {
	if _, err := w.res.ExecContext(ctx, `INSERT INTO register (key, value, fence) VALUES (?, ?, ?)
		ON CONFLICT (key) DO UPDATE SET value = excluded.value, fence = excluded.fence`, key, value, int64(f)); err != nil {
		return err
	}
	w.say("wrote %q (fence %d, unfenced write)", value, f)
	return w.logWrite(ctx, f, value, true)
}

func (w *worker) logWrite(ctx context.Context, f uint64, value string, accepted bool) error {
	_, err := w.res.ExecContext(ctx, `INSERT INTO writes (proc, fence, value, accepted, at) VALUES (?, ?, ?, ?, ?)`,
		w.opts.Label, int64(f), value, accepted, time.Now().UnixNano())
	return err
}
