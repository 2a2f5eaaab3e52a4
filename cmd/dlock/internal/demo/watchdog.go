package demo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlockdev/dlock"
)

// runWatchdog: a job longer than its lease keeps the lock thanks to the
// watchdog, while another process probes in vain; then a killed holder's
// lock is free again within about the TTL.
func runWatchdog(ctx context.Context, e *env) (string, bool, error) {
	if _, err := e.resource(""); err != nil {
		return "", false, err
	}
	job, ttl := e.opts.WatchdogJob, e.wttl
	name := e.lockName("rebuild")
	a, err := e.spawn("", "A", "watchdog-job", "--name", name, "--ttl", ttl.String(), "--job", job.String())
	if err != nil {
		return "", false, err
	}
	if err := a.waitFor(ctx, "acquired", 30*time.Second); err != nil {
		return "", false, err
	}
	probe := job - min(ttl/2, time.Second)
	b, err := e.spawn("", "B", "watchdog-probe", "--name", name, "--ttl", ttl.String(), "--job", probe.String())
	if err != nil {
		return "", false, err
	}
	if err := e.waitAll(ctx, []*proc{a, b}, job+time.Minute); err != nil {
		return "", false, err
	}
	kept, err1 := countEvents(ctx, e.res, "job-kept-lease")
	stolen, err2 := countEvents(ctx, e.res, "probe-acquired")
	if err := errors.Join(err1, err2); err != nil {
		return "", false, err
	}
	freed, err := e.leaseCrash(ctx, e.lockName("rebuild-2"), ttl)
	if err != nil {
		return "", false, err
	}
	v := fmt.Sprintf("the %s lease outlived the %s job (B never got in), and after SIGKILL the lock was free again in %s (TTL %s)",
		ttl, job, freed.Round(time.Millisecond), ttl)
	return v, kept == 1 && stolen == 0 && freed <= ttl+ttl/2+time.Second, nil
}

func roleWatchdogJob(ctx context.Context, w *worker) error {
	lease, err := w.acquire(ctx)
	if err != nil {
		return err
	}
	w.say("acquired fence %d (TTL %s; the watchdog refreshes every %s); job of %s",
		lease.Fence(), lease.TTL(), (lease.TTL() / 3).Round(time.Millisecond), w.opts.Job)
	start := time.Now()
	tick := time.NewTicker(max(w.opts.Job/5, 100*time.Millisecond))
	defer tick.Stop()
	end := time.After(w.opts.Job)
	for {
		select {
		case <-lease.Done():
			w.say("lease lost: %v", errorLine(lease.Err()))
			return lease.Err()
		case <-tick.C:
			w.say("%s into the job: still held, expires in %s", time.Since(start).Round(time.Second),
				time.Until(lease.Expires()).Round(100*time.Millisecond))
		case <-end:
			if err := lease.Release(context.Background()); err != nil {
				return err
			}
			w.say("job done after %s; released", time.Since(start).Round(100*time.Millisecond))
			return record(ctx, w.res, w.opts.Label, "job-kept-lease", nowMs())
		}
	}
}

// roleWatchdogProbe tries the lock every TTL/2 for opts.Job.
func roleWatchdogProbe(ctx context.Context, w *worker) error {
	l, err := w.lock(ctx)
	if err != nil {
		return err
	}
	start, tries := time.Now(), 0
	for time.Since(start) < w.opts.Job {
		tries++
		lease, err := l.TryAcquire(ctx, w.opts.Name)
		var held *dlock.HeldError
		switch {
		case errors.As(err, &held):
			if tries == 1 {
				w.say("held by %s; trying every %s", held.Holder.String(), w.opts.TTL/2)
			}
		case err != nil:
			return err
		default:
			w.say("acquired fence %d: the job's lease was gone!", lease.Fence())
			_ = lease.Release(context.Background())
			return record(ctx, w.res, w.opts.Label, "probe-acquired", nowMs())
		}
		time.Sleep(w.opts.TTL / 2)
	}
	w.say("tried %d times over %s: held every time", tries, time.Since(start).Round(time.Second))
	return nil
}
