package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlockdev/dlock"
)

func init() {
	workerRoles["job"] = roleJob
	workerRoles["scheduler"] = roleScheduler
}

// demoCorrect: two processes each take the same lock (waiting) and work
// for a while; the work intervals never overlap.
func demoCorrect(ctx context.Context, e *demoEnv) (string, bool, error) {
	if _, err := e.resource(""); err != nil {
		return "", false, err
	}
	hold := max(e.ttl, time.Second)
	ps, err := e.spawnAll(ctx, []string{"A", "B"}, "job", "--name", e.lockName("job"),
		"--hold", hold.String(), "--wait", (4 * hold).String())
	if err != nil {
		return "", false, err
	}
	if err := e.waitAll(ctx, ps, time.Minute); err != nil {
		return "", false, err
	}
	ivs, err := intervals(ctx, e.res)
	if err != nil {
		return "", false, err
	}
	if len(ivs) != 2 {
		return fmt.Sprintf("%d of 2 processes worked", len(ivs)), false, nil
	}
	if overlaps(ivs) {
		return fmt.Sprintf("%s and %s worked at the same time", ivs[0].proc, ivs[1].proc), false, nil
	}
	gap := ivs[1].started - ivs[0].ended
	return fmt.Sprintf("no overlap: %s worked (fence %d), then %s (fence %d) %d ms after %s released",
		ivs[0].proc, ivs[0].fence, ivs[1].proc, ivs[1].fence, gap, ivs[0].proc), true, nil
}

// spawnAll starts one worker per label with the same role and arguments.
func (e *demoEnv) spawnAll(ctx context.Context, labels []string, role string, extra ...string) ([]*proc, error) {
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
func (e *demoEnv) waitAll(ctx context.Context, ps []*proc, timeout time.Duration) error {
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

// work records an interval of work under fence f lasting d.
func (w *worker) work(ctx context.Context, f uint64, d time.Duration) error {
	start := nowMs()
	time.Sleep(d)
	_, err := w.res.ExecContext(ctx, `INSERT INTO work (proc, fence, started, ended) VALUES (?, ?, ?, ?)`,
		w.opts.Label, int64(f), start, nowMs())
	return err
}

func roleJob(ctx context.Context, w *worker) error {
	w.say("waiting for %q (up to %s)", w.opts.Name, w.opts.Wait)
	lease, err := w.acquire(ctx)
	if err != nil {
		return err
	}
	w.say("acquired fence %d; working for %s", lease.Fence(), w.opts.Hold)
	if err := w.work(ctx, lease.Fence(), w.opts.Hold); err != nil {
		return err
	}
	if err := lease.Release(context.Background()); err != nil {
		return err
	}
	w.say("done; released")
	return nil
}

// roleScheduler is one of two schedulers firing the same nightly job.
func roleScheduler(ctx context.Context, w *worker) error {
	l, err := w.lock(ctx)
	if err != nil {
		return err
	}
	sleepUntil(w.opts.Since)
	lease, err := l.TryAcquire(ctx, w.opts.Name)
	var held *dlock.HeldError
	if errors.As(err, &held) {
		w.say("lock held by %s: skipping the job", held.Holder.String())
		return record(ctx, w.res, w.opts.Label, "skipped", nowMs())
	}
	if err != nil {
		return err
	}
	w.say("got the lock (fence %d): running the nightly job", lease.Fence())
	if err := w.work(ctx, lease.Fence(), w.opts.Hold); err != nil {
		return err
	}
	w.say("job done; released")
	return lease.Release(context.Background())
}
