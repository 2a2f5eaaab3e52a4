package demo

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dlockdev/dlock"
)

// semPermits is the semaphore scenario's permit count.
const semPermits = 2

// runSemaphore: E and C hold the two permits; C is killed. Holders still
// lists C's permit, until its TTL runs out; D, waiting meanwhile, gets it
// with a higher fence, while E's permit is never touched.
func runSemaphore(ctx context.Context, e *env) (string, bool, error) {
	if _, err := e.resource(""); err != nil {
		return "", false, err
	}
	name := e.lockName("workers")
	sem, err := e.locker.Semaphore(name, semPermits)
	if err != nil {
		return "", false, err
	}
	common := []string{"--name", name, "--permits", strconv.Itoa(semPermits)}
	c, err := e.fillPermits(ctx, common)
	if err != nil {
		return "", false, err
	}
	before, err := e.showPermits(ctx, sem)
	if err != nil {
		return "", false, err
	}
	killed := time.Now()
	e.say("--", "SIGKILL C (a crash: no release, no more refreshes)")
	c.signal(syscall.SIGKILL)
	if _, err := e.showPermits(ctx, sem); err != nil {
		return "", false, err
	}
	freed, err := e.permitBack(ctx, common, killed)
	if err != nil {
		return "", false, err
	}
	after, err := e.showPermits(ctx, sem)
	if err != nil {
		return "", false, err
	}
	v, ok := semaphoreVerdict(holderOf(before, "C"), holderOf(after, "D"), freed, e.ttl)
	return v, ok, nil
}

// fillPermits starts E then C, each holding a permit, and returns C.
func (e *env) fillPermits(ctx context.Context, common []string) (*proc, error) {
	var c *proc
	for _, label := range []string{"E", "C"} {
		p, err := e.spawn("", label, "lease-hold", common...)
		if err != nil {
			return nil, err
		}
		if err := p.waitFor(ctx, "acquired", 30*time.Second); err != nil {
			return nil, err
		}
		c = p
	}
	return c, nil
}

// permitBack starts D, waiting for a permit, and returns how long after
// the kill it got one.
func (e *env) permitBack(ctx context.Context, common []string, killed time.Time) (time.Duration, error) {
	d, err := e.spawn("", "D", "permit-wait", append(common,
		"--since", strconv.FormatInt(killed.UnixMilli(), 10), "--wait", (3*e.ttl+10*time.Second).String())...)
	if err != nil {
		return 0, err
	}
	if err := d.waitFor(ctx, "acquired", 3*e.ttl+time.Minute); err != nil {
		return 0, err
	}
	ms, ok, err := eventMs(ctx, e.res, "freed-after")
	if err != nil || !ok {
		return 0, fmt.Errorf("process D recorded no acquisition: %v", err)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// showPermits prints the semaphore's holders as dlock lists them.
func (e *env) showPermits(ctx context.Context, sem *dlock.Semaphore) ([]dlock.Holder, error) {
	hs, err := sem.Holders(ctx)
	if err != nil {
		return nil, err
	}
	var parts []string
	for _, h := range hs {
		ttl := "no TTL"
		if h.TTL >= 0 {
			ttl = fmt.Sprintf("%s left", h.TTL.Round(10*time.Millisecond))
		}
		parts = append(parts, fmt.Sprintf("permit %d: %s, fence %d, %s", h.Slot, h.Owner, h.Fence, ttl))
	}
	e.say("--", "Holders: %d of %d permits held; %s", len(hs), semPermits, strings.Join(parts, "; "))
	return hs, nil
}

// holderOf is the permit the demo worker label holds in hs (Slot -1 if none).
func holderOf(hs []dlock.Holder, label string) dlock.Holder {
	for _, h := range hs {
		if strings.HasPrefix(h.Owner, "demo "+label+" ") {
			return h
		}
	}
	return dlock.Holder{Slot: -1}
}

// semaphoreVerdict says what the crash showed; ok is true when D got the
// crashed C's permit with a higher fence, within about the TTL.
func semaphoreVerdict(c, d dlock.Holder, freed, ttl time.Duration) (string, bool) {
	switch {
	case c.Slot < 0 || d.Slot < 0:
		return fmt.Sprintf("expected C's permit before the crash and D's after it, got permit %d and %d", c.Slot, d.Slot), false
	case d.Slot != c.Slot || d.Fence <= c.Fence:
		return fmt.Sprintf("D got permit %d with fence %d, but the crashed C held permit %d with fence %d", d.Slot, d.Fence, c.Slot, c.Fence), false
	}
	return fmt.Sprintf("C's permit %d came back %s after its SIGKILL (TTL %s) and D took it with fence %d > C's %d; the other permit was never touched",
		c.Slot, freed.Round(time.Millisecond), ttl, d.Fence, c.Fence), freed <= 2*ttl+time.Second
}

// rolePermitWait waits for a permit, records when it came, and holds it
// until killed (so that the demo lists it).
func rolePermitWait(ctx context.Context, w *worker) error {
	if _, err := w.waitAfterCrash(ctx); err != nil {
		return err
	}
	time.Sleep(24 * time.Hour) // until killed
	return nil
}
