package dlock

import "time"

// Clock is the time source a Locker measures its leases with: when a
// request was sent, when a lease expires (Lease.Expires), when the
// watchdog refreshes a lease and when it gives one up. The default is the
// host's clock, read monotonically, so that a wall-clock step does not
// move a lease.
//
// WithClock replaces it. That is for fault tests and simulations — a
// stalled, stepped or fast clock on the client, as a paused VM or a broken
// clock source produces (the chaos suite's S10b) — not for production.
// Contexts, waits (WithWait) and backoff stay on the host's clock: they
// bound how long a call runs, not whether a lease is believed held.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// NewTimer returns a timer that fires once d has passed on this clock.
	NewTimer(d time.Duration) Timer
}

// Timer is a Clock's one-shot timer, with the semantics of *time.Timer
// (Go 1.23 and later: Stop and Reset leave no stale value in C).
type Timer interface {
	// C delivers the time when the timer fires.
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it was
	// active.
	Stop() bool
	// Reset makes the timer fire after d; it reports whether it was
	// active.
	Reset(d time.Duration) bool
}

// WithClock makes the Locker read time from c instead of the host's clock
// (see Clock: for fault tests). It is a Locker option: give it to Open or
// NewLocker; given to one Acquire it is an invalid argument. A nil Clock is
// an invalid argument.
func WithClock(c Clock) Option {
	return func(s *settings) {
		if c == nil {
			s.fail(invalid("nil Clock (omit WithClock for the host's clock)"))
			return
		}
		s.clock = c
	}
}

// hostClock is the default Clock: the host's, with monotonic readings.
type hostClock struct{}

func (hostClock) Now() time.Time { return time.Now() }

func (hostClock) NewTimer(d time.Duration) Timer { return hostTimer{time.NewTimer(d)} }

type hostTimer struct{ t *time.Timer }

func (t hostTimer) C() <-chan time.Time        { return t.t.C }
func (t hostTimer) Stop() bool                 { return t.t.Stop() }
func (t hostTimer) Reset(d time.Duration) bool { return t.t.Reset(d) }

// onClock converts t, read from the host's clock (a driver's grant time,
// Grant.Since), to c's time: the same age on c. On the host's clock it is
// t itself.
func onClock(c Clock, t time.Time) time.Time {
	if _, ok := c.(hostClock); ok {
		return t
	}
	return c.Now().Add(-time.Since(t))
}
