package demo

import (
	"context"
	"fmt"
	"strconv"
	"syscall"
	"time"

	"github.com/dlockdev/dlock"
)

// runOrphan: a naive lock without TTL stays held forever after its holder
// crashes; a dlock lease is free again within its TTL.
func runOrphan(ctx context.Context, e *env) (string, bool, error) {
	if _, err := e.resource(""); err != nil {
		return "", false, err
	}
	naive, err := openNaive(ctx, e.url, e.dir)
	if err != nil {
		return "", false, err
	}
	defer naive.Close()
	key := e.lockName("naive-x")
	giveUp := max(3*e.ttl, 2*time.Second)
	wedged, err := e.naiveCrash(ctx, key, giveUp)
	if err != nil {
		return "", false, err
	}
	_, stillSet, err := naive.Get(ctx, key)
	if err != nil {
		return "", false, err
	}
	e.say("--", "recovering by hand, like `redis-cli DEL lock:x`")
	if err := naive.Del(ctx, key); err != nil {
		return "", false, err
	}
	freed, err := e.leaseCrash(ctx, e.lockName("x"), e.ttl)
	if err != nil {
		return "", false, err
	}
	v := fmt.Sprintf("naive lock (%s, no TTL) wedged: B gave up after %s and the key was still set; the crashed dlock holder's lock was free again after %s (TTL %s)",
		naive.What(), giveUp, freed.Round(time.Millisecond), e.ttl)
	return v, wedged && stillSet && freed <= 2*e.ttl+time.Second, nil
}

// naiveCrash: A takes the naive lock and is killed; B tries for giveUp.
// It reports whether B never got the lock.
func (e *env) naiveCrash(ctx context.Context, key string, giveUp time.Duration) (bool, error) {
	a, err := e.spawn("", "A", "naive-hold", "--name", key)
	if err != nil {
		return false, err
	}
	if err := a.waitFor(ctx, "acquired", 30*time.Second); err != nil {
		return false, err
	}
	e.say("--", "SIGKILL A (a crash before it could DEL)")
	a.kill()
	b, err := e.spawn("", "B", "naive-try", "--name", key, "--job", giveUp.String())
	if err != nil {
		return false, err
	}
	if _, err := b.wait(ctx, giveUp+30*time.Second); err != nil {
		return false, err
	}
	return b.has("gave up"), nil
}

// leaseCrash: C takes a dlock lease and is killed; D waits for it. It
// returns how long after the kill D got the lock.
func (e *env) leaseCrash(ctx context.Context, name string, ttl time.Duration) (time.Duration, error) {
	c, err := e.spawn("", "C", "lease-hold", "--name", name, "--ttl", ttl.String())
	if err != nil {
		return 0, err
	}
	if err := c.waitFor(ctx, "acquired", 30*time.Second); err != nil {
		return 0, err
	}
	killed := time.Now()
	e.say("--", "SIGKILL C (a crash: no release, no more refreshes)")
	c.signal(syscall.SIGKILL)
	d, err := e.spawn("", "D", "lease-wait", "--name", name, "--ttl", ttl.String(),
		"--since", strconv.FormatInt(killed.UnixMilli(), 10), "--wait", (3*ttl + 10*time.Second).String())
	if err != nil {
		return 0, err
	}
	if err := e.waitAll(ctx, []*proc{d}, 3*ttl+time.Minute); err != nil {
		return 0, err
	}
	ms, ok, err := eventMs(ctx, e.res, "freed-after")
	if err != nil || !ok {
		return 0, fmt.Errorf("process D recorded no acquisition: %v", err)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

func roleNaiveHold(ctx context.Context, w *worker) error {
	n, err := openNaive(ctx, w.url, w.opts.Dir)
	if err != nil {
		return err
	}
	defer n.Close()
	ok, err := n.SetNX(ctx, w.opts.Name, w.opts.Label, 0)
	if err != nil || !ok {
		return fmt.Errorf("naive SET failed: ok=%v err=%v", ok, err)
	}
	w.say("SET lock (%s, no TTL): acquired; working...", n.What())
	time.Sleep(24 * time.Hour) // until killed
	return nil
}

// roleNaiveTry tries the naive lock every 100 ms for opts.Job.
func roleNaiveTry(ctx context.Context, w *worker) error {
	n, err := openNaive(ctx, w.url, w.opts.Dir)
	if err != nil {
		return err
	}
	defer n.Close()
	start := time.Now()
	for tries := 1; ; tries++ {
		ok, err := n.SetNX(ctx, w.opts.Name, w.opts.Label, 0)
		if err != nil {
			return err
		}
		if ok {
			w.say("SET NX: acquired (try %d): the lock was free", tries)
			return record(ctx, w.res, w.opts.Label, "naive-acquired", nowMs())
		}
		if tries == 1 {
			holder, _, _ := n.Get(ctx, w.opts.Name)
			w.say("SET NX: lock held (by %q); retrying every 100 ms for %s", holder, w.opts.Job)
		}
		if time.Since(start) >= w.opts.Job {
			w.say("gave up after %d tries in %s: the lock is orphaned, held by a dead process", tries, w.opts.Job)
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func roleLeaseHold(ctx context.Context, w *worker) error {
	lease, err := w.acquire(ctx)
	if err != nil {
		return err
	}
	w.say("%s (TTL %s, watchdog on); working...", w.granted(lease), lease.TTL())
	time.Sleep(24 * time.Hour) // until killed
	return nil
}

// roleLeaseWait waits for the lock and records how long after opts.Since
// (the previous holder's death) it got it.
func roleLeaseWait(ctx context.Context, w *worker) error {
	lease, err := w.waitAfterCrash(ctx)
	if err != nil {
		return err
	}
	return lease.Release(context.Background())
}

// waitAfterCrash waits for the worker's grant and records how long after
// opts.Since (the previous holder's death) it got it, before saying so.
func (w *worker) waitAfterCrash(ctx context.Context) (*dlock.Lease, error) {
	w.say("waiting for %q (up to %s)", w.opts.Name, w.opts.Wait)
	lease, err := w.acquire(ctx)
	if err != nil {
		return nil, err
	}
	after := time.Since(time.UnixMilli(w.opts.Since)).Round(time.Millisecond)
	if err := record(ctx, w.res, w.opts.Label, "freed-after", after.Milliseconds()); err != nil {
		return nil, err
	}
	w.say("%s, %s after the holder died", w.granted(lease), after)
	return lease, nil
}
