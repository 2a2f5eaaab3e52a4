package dlock

import (
	"context"
	"errors"
	"fmt"

	"github.com/dlockdev/dlock/driver"
)

// Resume makes a live lease from a handle (Lease.Handle) of a lease this
// Locker did not grant: one handed over by a parent process to a worker,
// or held by this process before it restarted. The backend confirms that
// the handle's token still holds the lock and extends it to the TTL in
// one token-checked step; the lease's expiry counts from when that
// request was sent, as for a grant. From then on the lease is this
// Locker's like any other: the watchdog keeps it, and Done, Err, Context,
// Refresh, Release and Fence work as for a grant of the same kind, with
// the same fence and owner.
//
// Options: WithTTL overrides the TTL the handle carries, and
// WithAutoRefresh(false) leaves refreshing to the caller; the owner stays
// the one the lease was granted with.
//
// Errors: a malformed handle, or one made on another kind of backend,
// wraps ErrInvalidArgument and names what is wrong (never the token). A
// lock the token no longer holds — released, expired, force-released or
// taken over — yields a *LostError (matching ErrLost): the lease the handle
// stood for is gone, and work it guarded must not resume. A backend that
// cannot adopt a lease (driver.Adopter) yields ErrUnsupported saying why,
// and a backend failure ErrBackend.
//
// The Locker that granted the lease keeps refreshing it, and releases it
// when released or closed, unless it was detached (Lease.Detach) or its
// process is gone.
func (l *Locker) Resume(ctx context.Context, handle string, opts ...Option) (*Lease, error) {
	if err := l.usable(); err != nil {
		return nil, err
	}
	h, err := decodeHandle(handle)
	if err != nil {
		return nil, err
	}
	ki := parseKey(h.key)
	if mine := driverName(l.drv); h.backend != mine {
		return nil, invalid("lease handle of lock %q was made on a %s backend, and this Locker's is %s", ki.name, h.backend, mine)
	}
	s, err := l.settingsFor(ki.name, append([]Option{WithTTL(h.ttl)}, opts...))
	if err != nil {
		return nil, err
	}
	ctx, t := l.traceAcquire(ctx, ki.name, ki.kind, s)
	return t.done(l.resume(ctx, h, s))
}

// resume asks the driver to adopt h's grant and makes it a lease.
func (l *Locker) resume(ctx context.Context, h handle, s settings) (*Lease, error) {
	name := parseKey(h.key).name
	ad, ok := l.drv.(driver.Adopter)
	if !ok {
		return nil, fmt.Errorf("dlock: resume %q: %s: %w", name, l.adoptWhyNot(), ErrUnsupported)
	}
	req := driver.Request{Name: h.key, Token: h.token, Owner: h.owner, TTL: s.ttl}
	sent := l.now()
	g, err := ad.Adopt(ctx, req, h.fence)
	switch {
	case err == nil && !g.Acquired:
		return nil, &LostError{Name: name, Fence: shownFence(h), Reason: LostTakenOver}
	case errors.Is(err, driver.ErrNotHeld):
		return nil, &LostError{Name: name, Fence: shownFence(h), Reason: lostReason(err)}
	case errors.Is(err, ErrUnsupported):
		return nil, fmt.Errorf("dlock: resume %q: %w", name, err)
	case err != nil:
		return nil, backend("resume", name, err)
	case g.Fence != h.fence:
		// The token is the grant's: a fence that differs was altered.
		return nil, invalid("lease handle of lock %q says fence %d, and the backend's grant to its token has fence %d", name, h.fence, g.Fence)
	}
	if since := onClock(l.clock, g.Since); !g.Since.IsZero() && since.Before(sent) {
		sent = since // the lease rides on an older renewal, as a grant may
	}
	ls, err := l.granted(req, g, sent, s)
	if err == nil && h.shown != 0 {
		ls.shown.Store(h.shown)
	}
	return ls, err
}

// shownFence is the fence a lease made from h reports.
func shownFence(h handle) uint64 {
	if h.shown != 0 {
		return h.shown
	}
	return h.fence
}

// CanResume reports whether this Locker's backend can adopt a lease
// another Locker granted (Resume): nil if it can, or an error matching
// ErrUnsupported that says why not — a server that would run as one of
// several replicas asks this before it starts.
func (l *Locker) CanResume() error {
	if _, ok := l.drv.(driver.Adopter); ok {
		return nil
	}
	return fmt.Errorf("dlock: the %s backend cannot resume a lease another Locker granted: %s: %w", l.backend, l.adoptWhyNot(), ErrUnsupported)
}

// adoptWhyNot says why the driver cannot adopt a lease.
func (l *Locker) adoptWhyNot() string {
	if why := l.caps.AdoptWhyNot; why != "" {
		return why
	}
	return "the " + driverName(l.drv) + " backend cannot adopt a lease granted to another Locker"
}
