package demo

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/dlockdev/dlock"
)

// runStaleRelease: A's naive lock expires while A is frozen, B takes it,
// A wakes and DELs it: B's lock is gone and C gets in. With dlock, A's
// token-checked release is a no-op and B keeps the lock.
func runStaleRelease(ctx context.Context, e *env) (string, bool, error) {
	if _, err := e.resource(""); err != nil {
		return "", false, err
	}
	naive, err := openNaive(ctx, e.url, e.dir)
	if err != nil {
		return "", false, err
	}
	defer naive.Close()
	if err := e.naiveStaleRelease(ctx, naive, e.lockName("naive-x")); err != nil {
		return "", false, err
	}
	intruders, err := countEvents(ctx, e.res, "naive-acquired")
	if err != nil {
		return "", false, err
	}
	keptBy, err := e.tokenStaleRelease(ctx, e.lockName("x"))
	if err != nil {
		return "", false, err
	}
	refused, err := countEvents(ctx, e.res, "release-refused")
	if err != nil {
		return "", false, err
	}
	v := fmt.Sprintf("plain DEL: A deleted B's lock and C got in while B worked (two holders); token check: A's release was a no-op and the lock stayed with %s",
		keptBy)
	return v, intruders == 1 && refused == 1 && strings.Contains(keptBy, "demo B2"), nil
}

func (e *env) naiveStaleRelease(ctx context.Context, naive naiveStore, key string) error {
	a, err := e.spawn("", "A", "naive-stale", "--name", key)
	if err != nil {
		return err
	}
	if err := e.waitExpiry(ctx, a, ""); err != nil {
		return err
	}
	b, err := e.spawn("", "B", "naive-holder", "--name", key, "--hold", (2 * e.ttl).String())
	if err != nil {
		return err
	}
	if err := b.waitFor(ctx, "acquired", 30*time.Second); err != nil {
		return err
	}
	e.say("--", "SIGCONT A")
	a.signal(syscall.SIGCONT)
	if err := a.waitFor(ctx, "plain DEL", 30*time.Second); err != nil {
		return err
	}
	if v, ok, err := naive.Get(ctx, key); err == nil {
		e.say("--", "GET lock → %s, while B is still working", naiveValue(v, ok))
	}
	c, err := e.spawn("", "C", "naive-try", "--name", key, "--job", "1s")
	if err != nil {
		return err
	}
	return e.waitAll(ctx, []*proc{a, b, c}, time.Minute)
}

func naiveValue(v string, ok bool) string {
	if !ok {
		return "(nil)"
	}
	return fmt.Sprintf("%q", v)
}

// tokenStaleRelease replays the story with dlock leases and returns the
// owner holding the lock after A2's release attempt.
func (e *env) tokenStaleRelease(ctx context.Context, name string) (string, error) {
	e.say("--", "the same story with dlock's token-checked release")
	a, err := e.spawn("", "A2", "pause-holder", "--name", name, "--then", "release")
	if err != nil {
		return "", err
	}
	if err := e.waitExpiry(ctx, a, name); err != nil {
		return "", err
	}
	// B2 holds long enough to outlast A2's waking, its release attempt
	// (on ZooKeeper a second of finding its session gone) and its exit,
	// even on a busy machine: the check below must see B2 still holding.
	b, err := e.spawn("", "B2", "writer", "--name", name, "--hold", (5 * e.ttl).String(), "--wait", (3 * e.ttl).String())
	if err != nil {
		return "", err
	}
	if err := b.waitFor(ctx, "acquired", 30*time.Second); err != nil {
		return "", err
	}
	e.say("--", "SIGCONT A2")
	a.signal(syscall.SIGCONT)
	if err := e.waitAll(ctx, []*proc{a}, time.Minute); err != nil {
		return "", err
	}
	h, ok, err := e.locker.Inspect(ctx, name)
	keptBy := "nobody"
	if err == nil && ok {
		keptBy = h.Owner
		e.say("--", "inspect: held by %s", h.String())
	}
	return keptBy, e.waitAll(ctx, []*proc{b}, time.Minute)
}

func roleNaiveStale(ctx context.Context, w *worker) error {
	n, err := openNaive(ctx, w.url, w.opts.Dir)
	if err != nil {
		return err
	}
	defer n.Close()
	ok, err := n.SetNX(ctx, w.opts.Name, "A-token", w.opts.TTL)
	if err != nil || !ok {
		return fmt.Errorf("naive SET failed: ok=%v err=%v", ok, err)
	}
	w.say("SET lock A-token NX EX %s (%s): acquired", w.opts.TTL, n.What())
	w.freeze()
	if err := n.Del(ctx, w.opts.Name); err != nil {
		return err
	}
	w.say("done; released with a plain DEL (no token check)")
	return nil
}

// roleNaiveHolder takes the naive lock with a long TTL, works, then checks
// whether it still has it.
func roleNaiveHolder(ctx context.Context, w *worker) error {
	n, err := openNaive(ctx, w.url, w.opts.Dir)
	if err != nil {
		return err
	}
	defer n.Close()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		ok, err := n.SetNX(ctx, w.opts.Name, "B-token", 30*time.Second)
		if err != nil {
			return err
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("never got the naive lock")
		}
	}
	w.say("SET lock B-token NX EX 30s: acquired (A's had expired); working for %s", w.opts.Hold)
	time.Sleep(w.opts.Hold)
	v, ok, err := n.Get(ctx, w.opts.Name)
	if err != nil {
		return err
	}
	if v != "B-token" {
		w.say("done; GET lock → %s: my lock was deleted under me", naiveValue(v, ok))
		return nil
	}
	w.say("done; my lock is still mine")
	return n.Del(ctx, w.opts.Name)
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
