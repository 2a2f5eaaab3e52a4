package dlock

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlockdev/dlock/driver"
)

// releaseTimeout bounds Release's own context, which is detached from the
// caller's cancellation so that a canceled request still frees its lock.
const releaseTimeout = 5 * time.Second

// minReleaseBudget is the least a release is given when the caller's
// deadline is nearer or past: enough for one round trip to a healthy
// backend, so that a request whose deadline ran out still frees its lock.
const minReleaseBudget = 250 * time.Millisecond

// releaseContext is the context of a release: detached from ctx's
// cancellation, bounded by releaseTimeout or by ctx's deadline when that is
// nearer (but never below minReleaseBudget), so that a caller with a
// deadline, such as a process that must exit within a grace period, is not
// held past it by an unreachable backend.
func releaseContext(ctx context.Context) (context.Context, context.CancelFunc) {
	budget := releaseTimeout
	if d, ok := ctx.Deadline(); ok {
		budget = min(budget, max(time.Until(d), minReleaseBudget))
	}
	if ctx.Done() != nil {
		ctx = context.WithoutCancel(ctx) // a context that cannot end needs no detaching
	}
	return context.WithTimeout(ctx, budget)
}

// Lease is one grant of a named lock. It is safe for concurrent use.
//
// Done and Err follow context.Context's contract: Done is closed when the
// lease ends, and Err then says how (ErrReleased, or an error matching
// ErrLost). Work that must not run without the lock should select on Done,
// or run under Context(parent), and fence its writes with Fence.
type Lease struct {
	host  leaseHost
	name  string
	token string
	owner string
	fence uint64
	auto  bool
	// shown, when set, is the fence Fence reports instead of fence: a
	// read grant's, taken from its RWMutex's gate (see RWMutex.RLock).
	shown atomic.Uint64
	// granted, hooks and reported are set for a lease a user call
	// returned to a Locker with hooks (hooks.go): when AcquireDone saw
	// it, the hooks, and whether its end is still to report.
	granted  time.Time
	hooks    []Hooks
	reported atomic.Int32

	mu  sync.Mutex
	ttl time.Duration
	// window is the length expires was counted from: ttl, but for a
	// provisional grant (driver.Grant.Window) until its first refresh.
	window   time.Duration
	expires  time.Time
	err      error
	released bool // Release has been called (the backend was asked)
	done     chan struct{}
	cancels  []context.CancelCauseFunc
}

// leaseHost is what a Lease calls back into: the Locker that granted it.
// Declared here, beside the Lease, so that the dependency points one way:
// the Locker uses leases and its watchdog; a lease knows only this.
type leaseHost interface {
	// driver is the backend the lease lives on.
	driver() driver.Driver
	// now reads the Locker's Clock.
	now() time.Time
	// backendTTL checks a TTL against the backend's limits.
	backendTTL(time.Duration) (time.Duration, error)
	// leaseRefreshed reports a confirmed refresh (a new schedule).
	leaseRefreshed(*Lease)
	// leaseReleasing reports that Release was called: stop keeping it.
	leaseReleasing(*Lease)
	// leaseEnded reports that the lease ended: stop keeping and forget it.
	leaseEnded(*Lease)
	// backendName names the backend, for hooks.
	backendName() string
}

func newLease(l leaseHost, req driver.Request, g driver.Grant, sent time.Time, auto bool) *Lease {
	ttl := req.TTL
	if g.TTL > 0 {
		ttl = g.TTL
	}
	window := ttl
	if g.Window > 0 && g.Window < ttl {
		window = g.Window
	}
	return &Lease{
		host: l, name: req.Name, token: req.Token, owner: req.Owner,
		fence: g.Fence, auto: auto, ttl: ttl, window: window,
		expires: sent.Add(window - driver.ClockDrift(window)),
		done:    make(chan struct{}),
	}
}

// Name returns the lock's name (a Semaphore's, RWMutex's or Election's
// name for their grants).
func (ls *Lease) Name() string { return parseKey(ls.name).name }

// Kind says what the lease is: KindMutex for a plain lock, KindPermit,
// KindRead, KindWrite or KindLeader for a grant of a primitive.
func (ls *Lease) Kind() Kind { return parseKey(ls.name).kind }

// Slot is a semaphore permit's index (0 to permits-1) or a read grant's
// slot; -1 for other kinds. A fence guard protecting a resource shared by
// a semaphore's holders keys its fences by name and slot.
func (ls *Lease) Slot() int { return parseKey(ls.name).slot }

// Token returns the lease's secret token: 128 random bits, hex-encoded.
// Only the holder of the token can refresh or release the lock.
func (ls *Lease) Token() string { return ls.token }

// Owner returns the holder description this lease was taken with.
func (ls *Lease) Owner() string { return ls.owner }

// Fence returns the fencing token of this grant: strictly greater than the
// fence of every earlier grant of the same name, across release, expiry,
// takeover and force-release. Pass it with every write to the protected
// resource and let the resource reject lower ones (package fence).
func (ls *Lease) Fence() uint64 {
	if f := ls.shown.Load(); f != 0 {
		return f
	}
	return ls.fence
}

// TTL returns the lease length currently granted.
func (ls *Lease) TTL() time.Duration {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.ttl
}

// Expires returns the latest time at which this process may still assume it
// holds the lock. It is conservative: counted from when the last confirmed
// acquire or refresh request was SENT, less a clock-drift margin, on this
// process's monotonic clock. Never compare it with another host's clock.
func (ls *Lease) Expires() time.Time {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.expires
}

// Done returns a channel closed when the lease ends: released, or lost.
func (ls *Lease) Done() <-chan struct{} { return ls.done }

// Err returns nil while the lease is held, ErrReleased after Release, or a
// *LostError (matching ErrLost) after it was lost.
func (ls *Lease) Err() error {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.err
}

// Context returns a child of parent that is canceled when the lease ends;
// context.Cause then returns the lease's Err (a *LostError on loss). Run
// the guarded work under it so that a lost lease stops the work at once.
func (ls *Lease) Context(parent context.Context) context.Context {
	ctx, cancel := context.WithCancelCause(parent)
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.err != nil {
		cancel(ls.err)
		return ctx
	}
	ls.cancels = append(ls.cancels, cancel)
	return ctx
}

// Refresh extends the lease to ttl from now, if it is still held. The
// watchdog does this by itself unless WithAutoRefresh(false) was given. A
// refresh never re-creates a lock that expired: it returns a *LostError.
func (ls *Lease) Refresh(ctx context.Context, ttl time.Duration) error {
	if err := validTTL(ttl); err != nil {
		return err
	}
	ttl, err := ls.host.backendTTL(ttl)
	if err != nil {
		return err
	}
	if err := ls.Err(); err != nil {
		return err
	}
	sent := ls.host.now()
	err = ls.host.driver().Refresh(ctx, ls.name, ls.token, ttl)
	return ls.refreshed(sent, ttl, err)
}

// refreshed records the outcome of a refresh sent at sent.
func (ls *Lease) refreshed(sent time.Time, ttl time.Duration, err error) error {
	switch {
	case err == nil:
		ls.mu.Lock()
		if ls.err == nil {
			ls.ttl, ls.window, ls.expires = ttl, ttl, sent.Add(ttl-driver.ClockDrift(ttl))
		}
		ls.mu.Unlock()
		ls.host.leaseRefreshed(ls)
		ls.refreshDone(RefreshOK, nil)
		return ls.Err()
	case errors.Is(err, driver.ErrNotHeld) && ls.releasing():
		// A watchdog refresh raced with Release, which decides the outcome.
		return ls.Err()
	case errors.Is(err, driver.ErrNotHeld):
		ls.refreshDone(RefreshLost, err)
		return ls.lose(lostReason(err), nil)
	default:
		err = backend("refresh", ls.Name(), err)
		ls.refreshDone(RefreshError, err)
		return err
	}
}

func (ls *Lease) releasing() bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.released
}

func lostReason(err error) string {
	switch {
	case errors.Is(err, driver.ErrTakenOver):
		return LostTakenOver
	case errors.Is(err, driver.ErrExpired):
		return LostExpired
	case errors.Is(err, driver.ErrSessionEnded):
		return LostSession
	}
	return LostExpired
}

// Release frees the lock if this lease still holds it (token-checked) and
// wakes waiters. It works even when ctx is already canceled: it runs under
// its own context, detached from ctx's cancellation and bounded by 5 s, or
// by ctx's deadline when that is nearer (with at least 250 ms to try).
// It returns nil on success, a *LostError (matching ErrLost) when the lock
// had already been lost (another holder's lock is never touched), and
// ErrReleased when called again.
func (ls *Lease) Release(ctx context.Context) error {
	prior, again := ls.markReleased()
	if again {
		return prior
	}
	rctx, cancel := releaseContext(ctx)
	defer cancel()
	return ls.settleRelease(prior, ls.host.driver().Release(rctx, ls.name, ls.token))
}

// markReleased records that Release was called and takes the lease off
// the watchdog. again is true, with the first outcome in prior, when it had
// been called before; otherwise prior is the lease's Err at that moment.
func (ls *Lease) markReleased() (prior error, again bool) {
	ls.mu.Lock()
	prior, again = ls.err, ls.released
	ls.released = true
	ls.mu.Unlock()
	if !again {
		ls.host.leaseReleasing(ls)
	}
	return prior, again
}

// settleRelease ends the lease after the backend answered a release (err)
// and returns Release's result; lost is the lease's Err before the release.
func (ls *Lease) settleRelease(lost, err error) error {
	switch {
	case lost != nil:
		return lost
	case err == nil:
		ls.finish(ErrReleased)
		return nil
	case errors.Is(err, driver.ErrNotHeld):
		return ls.lose(lostReason(err), nil)
	default:
		// The lease is ended locally either way: it is no longer refreshed
		// and will expire on the backend.
		ls.finish(ErrReleased)
		return backend("release", ls.Name(), err)
	}
}

// lose ends the lease with a *LostError and returns the lease's final Err.
func (ls *Lease) lose(reason string, cause error) error {
	ls.finish(&LostError{Name: ls.Name(), Fence: ls.Fence(), Reason: reason, Cause: cause})
	return ls.Err()
}

// finish ends the lease once; later calls keep the first outcome.
func (ls *Lease) finish(err error) {
	ls.mu.Lock()
	if ls.err != nil {
		ls.mu.Unlock()
		return
	}
	ls.err = err
	cancels := ls.cancels
	ls.cancels = nil
	close(ls.done)
	ls.mu.Unlock()
	for _, c := range cancels {
		c(err)
	}
	ls.host.leaseEnded(ls)
	ls.ended()
}

// errSessionGone is the cause of a loss pushed by a driver.SessionWatcher.
var errSessionGone = errors.New("the backend session holding the lock ended")
