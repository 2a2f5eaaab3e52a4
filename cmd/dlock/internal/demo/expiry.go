package demo

import (
	"context"
	"fmt"
	"time"
)

// waitExpiry waits until p has frozen itself and its lease has expired.
//
// On a backend whose lease is its session (ZooKeeper), the lease ends when
// the backend stops hearing from the frozen holder, after the session
// timeout rather than the TTL: then it waits until the dlock lock named
// lease is free (lease "" is a naive lock, which always has a TTL).
func (e *env) waitExpiry(ctx context.Context, p *proc, lease string) error {
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

// waitFree waits until nobody holds the dlock lock name (a minute at most).
func (e *env) waitFree(ctx context.Context, name string) error {
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
