package demo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlockdev/dlock"
)

// runCorrect: two processes each take the same lock (waiting) and work
// for a while; the work intervals never overlap.
func runCorrect(ctx context.Context, e *env) (string, bool, error) {
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
