package dlock

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlockdev/dlock/driver"
)

// Locker hands out leases on named locks from one backend. It is safe for
// concurrent use; make one per backend and share it, like a *sql.DB.
type Locker struct {
	drv      driver.Driver
	caps     driver.Capabilities
	defaults settings
	clock    Clock
	watchdog *watchdog
	backend  string

	hooksMu sync.Mutex              // serializes AddHooks and their removals
	hooks   atomic.Pointer[[]Hooks] // read on every acquire: nil when none
	hookIDs []uint64                // hooks' additions, in the order of *hooks
	hookSeq uint64                  // the last addition's id

	mu     sync.Mutex
	closed bool
	live   map[*Lease]struct{}

	// Background work (cleanups of abandoned attempts, releases of lost
	// leases) that Close stops and waits for.
	bgMu      sync.Mutex
	bgStopped bool
	bgStop    chan struct{}
	bg        sync.WaitGroup
}

// NewLocker wraps a driver in the portable layer. Driver packages call it
// from their constructors (redislock.New, pglock.New, ...); users rarely
// need it directly. opts become the Locker's defaults for every acquire.
// A nil driver or an invalid option is an error wrapping ErrInvalidArgument.
func NewLocker(drv driver.Driver, opts ...Option) (*Locker, error) {
	if drv == nil {
		return nil, invalid("nil driver")
	}
	return newLocker(drv, opts)
}

func newLocker(drv driver.Driver, opts []Option) (*Locker, error) {
	s := defaultSettings().with(opts)
	if s.err != nil {
		return nil, s.err
	}
	l := &Locker{drv: drv, defaults: s, clock: s.clock, live: map[*Lease]struct{}{}, bgStop: make(chan struct{}), backend: driverName(drv)}
	if l.clock == nil {
		l.clock = hostClock{}
	}
	if d, ok := drv.(driver.Describer); ok {
		l.caps = d.Capabilities()
	}
	if ls, ok := drv.(driver.LogSetter); ok && s.logger != nil {
		ls.SetLogger(s.logger)
	}
	l.watchdog = newWatchdog(drv, l.clock, l.releaseLost)
	return l, nil
}

// Driver returns the backend driver, for driver packages' own extensions.
func (l *Locker) Driver() driver.Driver { return l.drv }

// Settings returns the settings this Locker runs with, by URL query key
// and in the form a URL gives them: the defaults of every acquire (ttl,
// wait — "forever" for no bound — and owner) and the
// driver's own (driver.SettingsReporter: pglock's mode and table,
// redislock's prefix and fair, ...). A URL given to Open names all its
// settings or fails: each of its keys here has the value it gave.
func (l *Locker) Settings() map[string]string {
	s := map[string]string{"ttl": l.defaults.ttl.String(), "wait": l.defaults.wait.String()}
	if l.defaults.wait == Forever {
		s["wait"] = "forever"
	}
	s["owner"] = l.defaults.owner
	if r, ok := l.drv.(driver.SettingsReporter); ok {
		maps.Copy(s, r.Settings())
	}
	return s
}

// Capabilities describes the backend (minimum TTL, session-bound leases).
func (l *Locker) Capabilities() driver.Capabilities { return l.caps }

// Backend names the Locker's backend: the URL scheme given to Open, or the
// name of the driver's package for a Locker made with NewLocker.
func (l *Locker) Backend() string { return l.backend }

// driverName is the package name of drv's type, for NewLocker.
func driverName(drv any) string {
	t := reflect.TypeOf(drv)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if p := t.PkgPath(); p != "" {
		return path.Base(p)
	}
	return t.String()
}

// Close releases every lease still held (best effort, token-checked; in
// batches where the driver releases in batches), stops the watchdog and the
// background releases, and closes the driver. Acquire calls after Close fail with
// ErrInvalidArgument. Close is idempotent.
func (l *Locker) Close() error {
	if l == nil {
		return invalid("nil Locker")
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	leases := make([]*Lease, 0, len(l.live))
	for ls := range l.live {
		leases = append(leases, ls)
	}
	l.mu.Unlock()
	var errs []error
	for _, err := range unwrapJoin(releaseLeases(context.Background(), leases)) {
		if !errors.Is(err, ErrLost) && !errors.Is(err, ErrReleased) {
			errs = append(errs, err)
		}
	}
	l.watchdog.close()
	l.stopBackground()
	if err := l.drv.Close(); err != nil {
		errs = append(errs, fmt.Errorf("dlock: close driver: %w", err))
	}
	return errors.Join(errs...)
}

// usable reports a nil or closed Locker as an invalid argument.
func (l *Locker) usable() error {
	if l == nil {
		return invalid("nil Locker")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return invalid("Locker is closed")
	}
	return nil
}

// track registers a new lease and hands it to the watchdog, atomically
// with respect to Close: a lease is either refused or seen by Close.
func (l *Locker) track(ls *Lease) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.live[ls] = struct{}{}
	l.watchdog.add(ls)
	return true
}

func (l *Locker) untrack(ls *Lease) {
	l.mu.Lock()
	delete(l.live, ls)
	l.mu.Unlock()
}

// The leaseHost side of the Locker: what its leases call back into.

func (l *Locker) driver() driver.Driver    { return l.drv }
func (l *Locker) now() time.Time           { return l.clock.Now() }
func (l *Locker) backendName() string      { return l.backend }
func (l *Locker) leaseRefreshed(ls *Lease) { l.watchdog.reschedule(ls) }
func (l *Locker) leaseReleasing(ls *Lease) { l.watchdog.remove(ls) }

func (l *Locker) leaseEnded(ls *Lease) {
	l.watchdog.remove(ls)
	l.untrack(ls)
}

// unwrapJoin splits an errors.Join result into its parts.
func unwrapJoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	if err == nil {
		return nil
	}
	return []error{err}
}
