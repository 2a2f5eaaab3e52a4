package dlock

import (
	"context"
	cryptorand "crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"time"

	"github.com/dlockdev/dlock/driver"
)

// Acquire takes the named lock, waiting while it is held: until it is
// granted, ctx is done, or the wait bound (WithWait, default DefaultWait)
// runs out. A lock that stays held yields an error matching ErrNotAcquired
// (errors.As gives a *HeldError naming the holder); a canceled ctx yields
// one that matches both ErrNotAcquired and ctx's error.
//
// Only a backend's positive answer that someone else holds the lock
// becomes ErrNotAcquired. A backend that fails, or does not answer before
// ctx or the wait bound ends, yields an error matching ErrBackend (and
// ctx's error) instead, so an outage never reads as "held". An error that
// retrying cannot cure (driver.ErrPermanent: missing schema, failed
// authentication) ends the wait at once. The call returns by ctx's
// deadline: whatever an abandoned attempt may have won is released in
// the background.
//
// ctx bounds the wait only, never the lease: the lease lives until
// Release, loss, or Locker.Close.
//
// Waiters are woken by the release itself on backends that notify
// (driver.Notifier) and queue fairly where the backend queues
// (driver.Queuer); otherwise, and as a fallback, they poll with capped
// exponential backoff and full jitter, never sleeping past the holder's
// remaining TTL. Every attempt of one call uses the same token, so an
// attempt whose reply was lost is recognised as a grant on the next one;
// an attempt abandoned mid-flight is released, best effort.
func (l *Locker) Acquire(ctx context.Context, name string, opts ...Option) (*Lease, error) {
	s, err := l.settingsFor(name, opts)
	if err != nil {
		return nil, err
	}
	ctx, t := l.traceAcquire(ctx, name, KindMutex, s)
	ls, err := l.acquire(ctx, name, s)
	return t.done(ls, err)
}

// TryAcquire makes exactly one attempt to take the named lock. When it is
// held the error matches ErrNotAcquired and carries a *HeldError.
func (l *Locker) TryAcquire(ctx context.Context, name string, opts ...Option) (*Lease, error) {
	s, err := l.settingsFor(name, opts)
	if err != nil {
		return nil, err
	}
	s.wait = 0
	ctx, t := l.traceAcquire(ctx, name, KindMutex, s)
	ls, err := l.acquire(ctx, name, s)
	return t.done(ls, err)
}

// AcquireAll takes several locks, all or nothing. Names are sorted and
// deduplicated first, so every caller takes them in the same order and two
// callers asking for {a, b} and {b, a} can never deadlock. The wait bound
// (WithWait) covers the whole set. On failure every lock already taken is
// released and the error names the lock that could not be had. The leases
// are returned in sorted name order.
func (l *Locker) AcquireAll(ctx context.Context, names []string, opts ...Option) ([]*Lease, error) {
	if err := l.usable(); err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, invalid("AcquireAll needs at least one name")
	}
	sorted := slices.Clone(names)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	s := l.defaults
	for _, n := range sorted {
		var err error
		if s, err = l.settingsFor(n, opts); err != nil {
			return nil, err
		}
	}
	start := time.Now()
	leases := make([]*Lease, 0, len(sorted))
	for _, n := range sorted {
		step := s
		if s.wait != Forever && s.wait != 0 {
			step.wait = max(s.wait-time.Since(start), 0)
		}
		tctx, t := l.traceAcquire(ctx, n, KindMutex, step)
		ls, err := t.done(l.acquire(tctx, n, step))
		if err != nil {
			ReleaseAll(context.WithoutCancel(ctx), leases)
			return nil, err
		}
		leases = append(leases, ls)
	}
	return leases, nil
}

// acquire takes one backend key — a plain lock's name, or a grant of a
// primitive — waiting through the wait engine (waiter) as s says.
func (l *Locker) acquire(ctx context.Context, key string, s settings) (*Lease, error) {
	if err := l.watchdog.keepUp(ctx); err != nil {
		return nil, fmt.Errorf("dlock: acquire %q: this Locker's lease refreshes are behind, and the context ended before they caught up: %w", parseKey(key).name, err)
	}
	a := attempt{l: l, s: s, req: driver.Request{Name: key, Token: newToken(), Owner: s.owner, TTL: s.ttl}}
	w, wctx := l.waitFor(ctx, parseKey(key).name, s)
	defer w.close()
	w.token = a.req
	a.queue = w.attemptQueue()
	return w.run(ctx, wctx, a.look)
}

// attempt is a wait's side of one key: every look is one attempt with
// the same token, so that an attempt whose reply was lost is recognised
// as a grant by the next.
type attempt struct {
	l   *Locker
	s   settings
	req driver.Request
	// queue, when set, is the backend's queue each attempt waits in.
	queue driver.Queuer
}

// look makes one attempt; a grant becomes a live lease.
func (a *attempt) look(ctx context.Context, _ *Lease) sight {
	if a.queue != nil {
		return a.queued(a.l.queueAttempt(ctx, a.queue, a.req))
	}
	sent := a.l.clock.Now()
	g, err := a.l.drv.TryAcquire(ctx, a.req)
	if err == nil && g.Acquired {
		if since := onClock(a.l.clock, g.Since); !g.Since.IsZero() && since.Before(sent) {
			sent = since // the grant rides on an older renewal (a shared lease)
		}
		return a.granted(g, sent)
	}
	if err != nil {
		return sight{failed: err}
	}
	return a.blocked(g.Holder, sight{})
}

// queued is the sight of an attempt that waited in the backend's queue.
// A queue that ended with the context reports the holder it queued
// behind; with none, the backend never answered. A transport failure
// mid-wait (a server restart, a dropped connection) is retried within the
// wait bound: the driver has given up its place in the queue.
func (a *attempt) queued(r queued) sight {
	if r.err == nil && r.g.Acquired {
		return a.granted(r.g, r.sent)
	}
	sg := sight{failed: r.err, queued: true}
	if r.g.Holder != (driver.Holder{}) {
		return a.blocked(r.g.Holder, sg)
	}
	return sg
}

// granted turns the attempt's grant into a live lease.
func (a *attempt) granted(g driver.Grant, sent time.Time) sight {
	ls, err := a.l.granted(a.req, g, sent, a.s)
	return sight{lease: ls, err: err}
}

// blocked adds the holder the backend named to sg, under the key's names:
// the grant's kind is the key's, whatever the driver filled in.
func (a *attempt) blocked(dh driver.Holder, sg sight) sight {
	h := holderFrom(dh)
	ki := parseKey(a.req.Name)
	h.Name, h.Kind, h.Permits, h.Slot = ki.name, ki.kind, ki.permits, ki.slot
	sg.held, sg.blame, sg.answered = []Holder{h}, h, true
	return sg
}

// newToken returns 128 bits from crypto/rand, hex-encoded. crypto/rand.Read
// never fails on supported platforms (it panics internally if the kernel
// cannot supply randomness), so there is no error path to get wrong.
func newToken() string {
	var b [16]byte
	_, _ = cryptorand.Read(b[:])
	return hex.EncodeToString(b[:])
}
