package dlock

import (
	"context"
	"errors"
	"time"

	"github.com/dlockdev/dlock/driver"
)

// cleanupTimeout bounds one best-effort release of whatever an abandoned
// attempt may have won.
const cleanupTimeout = 2 * time.Second

// cleanup releases req's token, best effort, in the background: the call
// that abandoned the attempt returns by its caller's deadline and does not
// wait for it. Locker.Close waits for every cleanup still running.
func (l *Locker) cleanup(req driver.Request) {
	l.background(func(stop <-chan struct{}) {
		ctx, cancel := stopContext(stop, cleanupTimeout)
		defer cancel()
		_ = l.drv.Release(ctx, req.Name, req.Token)
	})
}

// releaseLost frees, on the backend, a lease the watchdog declared lost
// because no refresh could be confirmed in time. The backend may still hold
// it: a refresh sent before the loss can land after it (a stalled server
// answers late) and extend the lock for a whole TTL, so that nobody holds
// it and nobody can take it. The token-checked release is retried, with
// capped backoff, until the backend answers (released, or not held by
// this token: both settle it) or the Locker is closed.
func (l *Locker) releaseLost(name, token string, ttl time.Duration) {
	l.background(func(stop <-chan struct{}) {
		pause := max(ttl/12, 10*time.Millisecond)
		for {
			ctx, cancel := stopContext(stop, max(ttl/3, cleanupTimeout))
			err := l.drv.Release(ctx, name, token)
			cancel()
			if err == nil || errors.Is(err, driver.ErrNotHeld) || errors.Is(err, driver.ErrPermanent) {
				return
			}
			t := time.NewTimer(pause)
			select {
			case <-stop:
				t.Stop()
				return
			case <-t.C:
			}
			pause = min(pause*2, max(ttl, 10*time.Millisecond))
		}
	})
}

// background runs fn in a goroutine that Locker.Close stops (by closing
// stop) and waits for. Once Close has stopped the background work, fn
// runs at once with stop closed: the driver is being closed, and nothing
// may outlive Close.
func (l *Locker) background(fn func(stop <-chan struct{})) {
	l.bgMu.Lock()
	defer l.bgMu.Unlock()
	if l.bgStopped {
		fn(l.bgStop)
		return
	}
	l.bg.Add(1)
	go func() {
		defer l.bg.Done()
		fn(l.bgStop)
	}()
}

// stopBackground ends the background work and waits for it; Close calls it
// once, after the watchdog has stopped.
func (l *Locker) stopBackground() {
	l.bgMu.Lock()
	l.bgStopped = true
	close(l.bgStop)
	l.bgMu.Unlock()
	l.bg.Wait()
}

// stopContext is a context canceled when stop closes or d has passed.
func stopContext(stop <-chan struct{}, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}
