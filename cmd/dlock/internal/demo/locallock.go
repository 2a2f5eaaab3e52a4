package demo

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"
)

// Increments per process in the local-lock scenario.
const (
	localIncrements = 300
	dlockIncrements = 60
)

// runLocalLock: two processes increment one counter with a read-modify-
// write, each guarded by its own in-process mutex (lost updates), then by
// dlock (none lost).
func runLocalLock(ctx context.Context, e *env) (string, bool, error) {
	db, err := e.resource("")
	if err != nil {
		return "", false, err
	}
	local, err := e.countTogether(ctx, "counter-local", localIncrements, "A", "B")
	if err != nil {
		return "", false, err
	}
	if _, err := db.ExecContext(ctx, `UPDATE counter SET value = 0`); err != nil {
		return "", false, err
	}
	e.say("--", "counter reset to 0; now each increment runs under dlock")
	locked, err := e.countTogether(ctx, "counter-dlock", dlockIncrements, "C", "D")
	if err != nil {
		return "", false, err
	}
	v := fmt.Sprintf("in-process mutexes: counter %d after 2×%d increments (%d lost); dlock: %d after 2×%d (none lost)",
		local, localIncrements, 2*localIncrements-local, locked, dlockIncrements)
	return v, local < 2*localIncrements && locked == 2*dlockIncrements, nil
}

// countTogether runs two counter workers from the same instant and returns
// the counter's final value.
func (e *env) countTogether(ctx context.Context, role string, n int, a, b string) (int, error) {
	startAt := strconv.FormatInt(time.Now().Add(500*time.Millisecond).UnixMilli(), 10)
	var ps []*proc
	for _, label := range []string{a, b} {
		p, err := e.spawn("", label, role, "--n", strconv.Itoa(n), "--since", startAt,
			"--name", e.lockName("counter"), "--wait", "60s")
		if err != nil {
			return 0, err
		}
		ps = append(ps, p)
	}
	for _, p := range ps {
		if code, err := p.wait(ctx, 2*time.Minute); err != nil || code != 0 {
			return 0, fmt.Errorf("worker %s failed (exit %d): %v", p.label, code, err)
		}
	}
	var v int
	err := e.res.QueryRowContext(ctx, `SELECT value FROM counter WHERE id = 1`).Scan(&v)
	return v, err
}

func roleCounterLocal(ctx context.Context, w *worker) error {
	var mu sync.Mutex // the in-process lock: this process's own variable
	sleepUntil(w.opts.Since)
	w.say("%d increments (read, then write +1), each under an in-process mutex", w.opts.N)
	for range w.opts.N {
		mu.Lock()
		err := w.increment(ctx)
		mu.Unlock()
		if err != nil {
			return err
		}
	}
	w.say("done; my mutex never saw the other process")
	return nil
}

func roleCounterDlock(ctx context.Context, w *worker) error {
	if _, err := w.lock(ctx); err != nil {
		return err
	}
	sleepUntil(w.opts.Since)
	w.say("%d increments, each under the dlock lease %q", w.opts.N, w.opts.Name)
	for range w.opts.N {
		lease, err := w.acquire(ctx)
		if err != nil {
			return err
		}
		err = w.increment(ctx)
		if rerr := lease.Release(context.Background()); err == nil {
			err = rerr
		}
		if err != nil {
			return err
		}
	}
	w.say("done")
	return nil
}
