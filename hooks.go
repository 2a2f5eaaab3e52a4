package dlock

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"
)

// Hooks are callbacks a Locker makes as locks are acquired, refreshed and
// end: the seam for metrics (package metrics), tracing (module dlockotel)
// and the server (package serve). Every field is optional. Add them with
// Locker.AddHooks.
//
// Hooks see the calls a user makes: Acquire, TryAcquire, each name of
// AcquireAll, Semaphore.Acquire and TryAcquire, RWMutex.Lock and RLock,
// and Election.Campaign, and the leases those calls return. The grants a
// primitive takes inside one call (a semaphore's queue place, the write
// key a reader passes through) are not reported. A call whose arguments
// are invalid is not reported either: it never reached the backend.
//
// Hooks run on the caller's goroutine (Acquiring, AcquireDone, and
// Refreshed and Ended for calls the caller makes) or on the watchdog's
// (Refreshed and Ended for automatic refreshes and losses), so they must
// be quick and must not block; they must not call back into the Locker
// for the same lease.
type Hooks struct {
	// Acquiring is called as an acquire call begins. The context it
	// returns (nil: ctx unchanged) is the one the call then runs under and
	// that AcquireDone receives, so a tracer can start a span here.
	Acquiring func(ctx context.Context, info AcquireInfo) context.Context
	// AcquireDone is called once for every Acquiring, when the call
	// returns: granted (ev.Lease set) or not (ev.Err set).
	AcquireDone func(ctx context.Context, ev AcquireEvent)
	// Refreshed is called after every refresh of a reported lease, by the
	// watchdog or Lease.Refresh.
	Refreshed func(ev RefreshEvent)
	// Ended is called once when a reported lease ends: released, or lost.
	Ended func(ev EndEvent)
}

// AcquireInfo describes an acquire call.
type AcquireInfo struct {
	// Backend names the backend: the URL scheme the Locker was opened
	// with (redis, postgres, etcd, ...), or the driver package's name.
	Backend string
	// Name is the lock's (or primitive's) name; Kind what is asked for.
	Name string
	Kind Kind
	// Wait is the call's wait bound: 0 for one attempt, Forever for none.
	Wait time.Duration
	// Owner is the holder description the call asks with (WithOwner).
	Owner string
	// Start is when the call began.
	Start time.Time
}

// Outcomes of an acquire call, as AcquireEvent.Outcome reports them.
const (
	// OutcomeAcquired: the lock was granted.
	OutcomeAcquired = "acquired"
	// OutcomeHeld: the backend answered that someone else holds it, until
	// the wait ran out (ErrNotAcquired).
	OutcomeHeld = "held"
	// OutcomeCanceled: the caller's context was canceled first.
	OutcomeCanceled = "canceled"
	// OutcomeError: the backend failed or did not answer (ErrBackend), or
	// the call was refused (ErrKindMismatch, a closed Locker).
	OutcomeError = "error"
)

// AcquireEvent is the end of an acquire call.
type AcquireEvent struct {
	AcquireInfo
	// Waited is how long the call took.
	Waited time.Duration
	// Outcome is one of OutcomeAcquired, OutcomeHeld, OutcomeCanceled and
	// OutcomeError.
	Outcome string
	// Lease is the grant; nil unless Outcome is OutcomeAcquired.
	Lease *Lease
	// Err is the call's error; nil when granted.
	Err error
}

// Results of a refresh, as RefreshEvent.Result reports them.
const (
	// RefreshOK: the backend extended the lease.
	RefreshOK = "ok"
	// RefreshLost: the backend answered that the lease is gone.
	RefreshLost = "lost"
	// RefreshError: the backend failed or did not answer; the lease is
	// kept until the watchdog's deadline.
	RefreshError = "error"
)

// RefreshEvent is one refresh of a lease.
type RefreshEvent struct {
	Backend string
	Lease   *Lease
	// Result is RefreshOK, RefreshLost or RefreshError.
	Result string
	Err    error
}

// EndReleased is EndEvent.Reason for a lease its holder released; the
// other reasons are LostError's (LostExpired, LostTakenOver, ...).
const EndReleased = "released"

// EndDetached is EndEvent.Reason for a lease handed on with Detach: it
// ended in this Locker, and lives on in the one that resumes it.
const EndDetached = "detached"

// EndEvent is the end of a lease.
type EndEvent struct {
	Backend string
	Lease   *Lease
	// Held is how long the lease was held, from the end of the acquire
	// call that returned it.
	Held time.Duration
	// Reason is EndReleased, EndDetached or the loss's reason
	// (LostError.Reason).
	Reason string
	// Err is the lease's Err: ErrReleased, ErrDetached or a *LostError.
	Err error
}

// AddHooks adds callbacks to the Locker, for the calls that start after it
// returns. Hooks added more than once are called once per addition, in
// the order added. remove takes this addition away again, for the calls
// that start after it returns (a server that stops, on a Locker that
// lives on); calling it again does nothing.
func (l *Locker) AddHooks(h Hooks) (remove func()) {
	l.hooksMu.Lock()
	defer l.hooksMu.Unlock()
	var next []Hooks
	if old := l.hooks.Load(); old != nil {
		next = append(next, *old...)
	}
	l.hookSeq++
	id := l.hookSeq
	l.hookIDs = append(l.hookIDs, id)
	next = append(next, h)
	l.hooks.Store(&next)
	var once sync.Once
	return func() { once.Do(func() { l.removeHooks(id) }) }
}

// removeHooks takes away the hooks added as id.
func (l *Locker) removeHooks(id uint64) {
	l.hooksMu.Lock()
	defer l.hooksMu.Unlock()
	i := slices.Index(l.hookIDs, id)
	if i < 0 {
		return
	}
	l.hookIDs = slices.Delete(l.hookIDs, i, i+1)
	next := slices.Delete(slices.Clone(*l.hooks.Load()), i, i+1)
	if len(next) == 0 {
		l.hooks.Store(nil)
		return
	}
	l.hooks.Store(&next)
}

// acquireTrace is one reported acquire call; nil when the Locker has no
// hooks, so that the hot path pays one atomic load.
type acquireTrace struct {
	ctx   context.Context // the call's, as Acquiring hooks left it
	hooks []Hooks
	info  AcquireInfo
}

// traceAcquire reports the start of an acquire call.
func (l *Locker) traceAcquire(ctx context.Context, name string, kind Kind, s settings) (context.Context, *acquireTrace) {
	hp := l.hooks.Load()
	if hp == nil {
		return ctx, nil
	}
	t := &acquireTrace{hooks: *hp, info: AcquireInfo{Backend: l.backend, Name: name, Kind: kind, Wait: s.wait, Owner: s.owner, Start: time.Now()}}
	for _, h := range t.hooks {
		if h.Acquiring != nil {
			if c := h.Acquiring(ctx, t.info); c != nil {
				ctx = c
			}
		}
	}
	t.ctx = ctx
	return ctx, t
}

// done reports the end of the call and passes its results through.
func (t *acquireTrace) done(ls *Lease, err error) (*Lease, error) {
	if t == nil {
		return ls, err
	}
	ev := AcquireEvent{AcquireInfo: t.info, Waited: time.Since(t.info.Start), Lease: ls, Err: err, Outcome: outcome(err)}
	if ls != nil {
		ls.hooks, ls.granted = t.hooks, time.Now()
	}
	for _, h := range t.hooks {
		if h.AcquireDone != nil {
			h.AcquireDone(t.ctx, ev)
		}
	}
	// The lease is reported from here on; if it ended already, its end
	// was not (Ended fires only for reported leases), so report it now.
	if ls != nil && !ls.reported.CompareAndSwap(leaseUnreported, leaseReported) {
		ls.reportEnd()
	}
	return ls, err
}

func outcome(err error) string {
	switch {
	case err == nil:
		return OutcomeAcquired
	case errors.Is(err, context.Canceled):
		return OutcomeCanceled
	case errors.Is(err, ErrNotAcquired):
		return OutcomeHeld
	}
	return OutcomeError
}

// Lease.reported states: a lease is reported to hooks once AcquireDone
// has seen it; its end is reported once, by whichever of done and finish
// comes second.
const (
	leaseUnreported = iota
	leaseReported
	leaseEndedEarly
)

// ended reports a lease's end if AcquireDone has reported it.
func (ls *Lease) ended() {
	if ls.reported.Swap(leaseEndedEarly) == leaseReported {
		ls.reportEnd()
	}
}

func (ls *Lease) reportEnd() {
	err := ls.Err()
	ev := EndEvent{Backend: ls.host.backendName(), Lease: ls, Held: time.Since(ls.granted), Reason: EndReleased, Err: err}
	var lost *LostError
	if errors.As(err, &lost) {
		ev.Reason = lost.Reason
	}
	if errors.Is(err, ErrDetached) {
		ev.Reason = EndDetached
	}
	for _, h := range ls.hooks {
		if h.Ended != nil {
			h.Ended(ev)
		}
	}
}

// refreshDone reports a refresh of a reported lease.
func (ls *Lease) refreshDone(result string, err error) {
	if ls.reported.Load() != leaseReported || ls.hooks == nil {
		return
	}
	ev := RefreshEvent{Backend: ls.host.backendName(), Lease: ls, Result: result, Err: err}
	for _, h := range ls.hooks {
		if h.Refreshed != nil {
			h.Refreshed(ev)
		}
	}
}
