package cli

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/fence"
	"github.com/dlockdev/dlock/fence/sqlitefence"
)

func init() {
	workerRoles["pause-holder"] = rolePauseHolder
	workerRoles["writer"] = roleWriter
}

// demoPause: A's lease expires while A is frozen; B takes the lock and
// writes; A resumes and writes too, unfenced: both wrote, A's stale value wins.
func demoPause(ctx context.Context, e *demoEnv) (string, bool, error) {
	log, err := e.pauseAndWrite(ctx, "write")
	if err != nil {
		return "", false, err
	}
	value, _, err := registerValue(ctx, e.res)
	if err != nil {
		return "", false, err
	}
	if len(log) != 2 || !log[0].accepted || !log[1].accepted || log[1].proc != "A" {
		return fmt.Sprintf("expected B then A to write, got %v", log), false, nil
	}
	return fmt.Sprintf("both wrote: B (fence %d) and then A (fence %d), who still believed it held the lock; the report now holds A's stale %q — mutual exclusion violated, the lock alone cannot prevent it",
		log[0].fence, log[1].fence, value), true, nil
}

// demoFencing: the same pause, but the register checks fences: A's late
// write with the older fence is rejected.
func demoFencing(ctx context.Context, e *demoEnv) (string, bool, error) {
	log, err := e.pauseAndWrite(ctx, "fenced-write")
	if err != nil {
		return "", false, err
	}
	value, f, err := registerValue(ctx, e.res)
	if err != nil {
		return "", false, err
	}
	if len(log) != 2 || !log[0].accepted || log[1].accepted || log[1].proc != "A" {
		return fmt.Sprintf("expected B's write accepted and A's rejected, got %v", log), false, nil
	}
	return fmt.Sprintf("stale write rejected at the resource: A's fence %d < %d; the report keeps B's %q (fence %d)",
		log[1].fence, log[0].fence, value, f), true, nil
}

// pauseAndWrite runs the pause choreography and returns the writes log:
// A acquires with the watchdog off and freezes; once its lease has expired
// B acquires and writes (then) and holds on; A is resumed and writes (then).
func (e *demoEnv) pauseAndWrite(ctx context.Context, then string) ([]writeAttempt, error) {
	if _, err := e.resource(""); err != nil {
		return nil, err
	}
	name := e.lockName("report")
	a, err := e.spawn("", "A", "pause-holder", "--name", name, "--then", then)
	if err != nil {
		return nil, err
	}
	if err := e.waitExpiry(ctx, a, name); err != nil {
		return nil, err
	}
	b, err := e.spawn("", "B", "writer", "--name", name, "--then", then, "--hold", e.ttl.String(), "--wait", (3 * e.ttl).String())
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

// waitExpiry waits until p has frozen itself and its lease has expired.
//
// On a backend whose lease is its session (ZooKeeper), the lease ends when
// the backend stops hearing from the frozen holder, after the session
// timeout rather than the TTL: then it waits until the dlock lock named
// lease is free (lease "" is a naive lock, which always has a TTL).
func (e *demoEnv) waitExpiry(ctx context.Context, p *proc, lease string) error {
	if err := p.waitFor(ctx, "freezing", 30*time.Second); err != nil {
		return err
	}
	if lease != "" && e.locker.Capabilities().SessionBound {
		e.say("--", "%s is frozen; waiting for the backend to end its session, and with it the lease", p.label)
		return e.waitFree(ctx, lease)
	}
	wait := e.ttl + e.ttl/4 + 100*time.Millisecond
	e.say("--", "%s is frozen; waiting %s for its %s lease to expire", p.label, wait.Round(time.Millisecond), e.ttl)
	return sleep(ctx, wait)
}

// rolePauseHolder acquires without the watchdog, freezes past its TTL,
// and on resume does opts.Then as if it still held the lock.
func rolePauseHolder(ctx context.Context, w *worker) error {
	lease, err := w.acquire(ctx, dlock.WithAutoRefresh(false))
	if err != nil {
		return err
	}
	w.say("acquired fence %d (TTL %s, watchdog off)", lease.Fence(), lease.TTL())
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
	w.say("acquired fence %d", lease.Fence())
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

// act does what opts.Then says, under lease.
func (w *worker) act(ctx context.Context, lease *dlock.Lease) error {
	value := "report by " + w.opts.Label
	switch w.opts.Then {
	case "write":
		return w.plainWrite(ctx, lease.Fence(), value)
	case "fenced-write":
		return w.fencedWrite(ctx, lease.Fence(), value)
	case "release":
		return w.tokenRelease(lease)
	case "":
		return nil
	}
	return fmt.Errorf("unknown action %q", w.opts.Then)
}

func (w *worker) plainWrite(ctx context.Context, f uint64, value string) error {
	if _, err := w.res.ExecContext(ctx, `UPDATE register SET value = ?, fence = ? WHERE key = 'report'`, value, int64(f)); err != nil {
		return err
	}
	w.say("wrote %q (fence %d, unfenced write)", value, f)
	return w.logWrite(ctx, f, value, true)
}

func (w *worker) fencedWrite(ctx context.Context, f uint64, value string) error {
	err := registerTable.Update(ctx, w.res, "report", f, sqlitefence.Values{"value": value})
	var stale *fence.StaleError
	switch {
	case errors.As(err, &stale):
		w.say("write %q with fence %d REJECTED by the resource: fence %d has written since", value, f, stale.Current)
		return w.logWrite(ctx, f, value, false)
	case err != nil:
		return err
	}
	w.say("wrote %q (fence %d, accepted by the fenced register)", value, f)
	return w.logWrite(ctx, f, value, true)
}

func (w *worker) logWrite(ctx context.Context, f uint64, value string, accepted bool) error {
	_, err := w.res.ExecContext(ctx, `INSERT INTO writes (proc, fence, value, accepted, at) VALUES (?, ?, ?, ?, ?)`,
		w.opts.Label, int64(f), value, accepted, time.Now().UnixNano())
	return err
}

// tokenRelease releases with dlock's token check.
func (w *worker) tokenRelease(lease *dlock.Lease) error {
	err := lease.Release(context.Background())
	if errors.Is(err, dlock.ErrLost) {
		w.say("token-checked release is a no-op: %v", errorLine(err))
		return record(context.Background(), w.res, w.opts.Label, "release-refused", nowMs())
	}
	if err != nil {
		return err
	}
	w.say("released (my token still held the lock)")
	return nil
}

// waitFree waits until nobody holds the dlock lock name (a minute at most).
func (e *demoEnv) waitFree(ctx context.Context, name string) error {
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		if _, held, err := e.locker.Inspect(ctx, name); err != nil || !held {
			return err
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
	return fmt.Errorf("demo: %q was still held a minute after its holder froze", name)
}
