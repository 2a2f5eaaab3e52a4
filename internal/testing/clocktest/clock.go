// Package clocktest provides a dlock.Clock for fault tests: it follows the
// host's clock at a rate that a test changes (0 stalls it, as a paused VM's
// clock source; 3 runs it three times as fast) and steps forward or back.
package clocktest

import (
	"sync"
	"time"

	"github.com/dlockdev/dlock"
)

// Clock is a dlock.Clock under a test's control. Its readings carry the
// host's monotonic reading, so that they compare and subtract like the
// host's. The zero value is not usable: call New.
type Clock struct {
	mu     sync.Mutex
	base   time.Time // the reading at anchor
	anchor time.Time // the host's reading when base was set
	rate   float64
	timers map[*timer]struct{}
}

var _ dlock.Clock = (*Clock)(nil)

// New returns a Clock reading the host's time at rate 1.
func New() *Clock {
	now := time.Now()
	return &Clock{base: now, anchor: now, rate: 1, timers: map[*timer]struct{}{}}
}

// Now returns the clock's reading.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now()
}

func (c *Clock) now() time.Time {
	return c.base.Add(time.Duration(float64(time.Since(c.anchor)) * c.rate))
}

// Step moves the clock by d (negative: back). Timers due at the new
// reading fire at once.
func (c *Clock) Step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.base, c.anchor = c.now().Add(d), time.Now()
	c.rescheduleAll()
}

// SetRate makes the clock advance rate seconds per host second from now
// on (0 stalls it). A negative rate panics: it is a test's mistake.
func (c *Clock) SetRate(rate float64) {
	if rate < 0 {
		panic("clocktest: negative rate")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.base, c.anchor, c.rate = c.now(), time.Now(), rate
	c.rescheduleAll()
}

func (c *Clock) rescheduleAll() {
	for t := range c.timers {
		c.schedule(t)
	}
}

// NewTimer returns a timer that fires when the clock reaches now + d.
func (c *Clock) NewTimer(d time.Duration) dlock.Timer {
	t := &timer{c: c, ch: make(chan time.Time, 1)}
	c.mu.Lock()
	defer c.mu.Unlock()
	t.arm(d)
	return t
}

// schedule fires t if it is due, or sets a host timer for when it will
// be at the current rate (none while the clock is stalled). c.mu is held.
func (c *Clock) schedule(t *timer) {
	if t.host != nil {
		t.host.Stop()
		t.host = nil
	}
	now := c.now()
	if !now.Before(t.target) {
		delete(c.timers, t)
		select {
		case t.ch <- now:
		default:
		}
		return
	}
	if c.rate == 0 {
		return
	}
	wait := time.Duration(float64(t.target.Sub(now))/c.rate) + time.Microsecond
	t.host = time.AfterFunc(wait, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if _, ok := c.timers[t]; ok {
			c.schedule(t)
		}
	})
}

type timer struct {
	c      *Clock
	ch     chan time.Time
	target time.Time   // guarded by c.mu
	host   *time.Timer // guarded by c.mu
}

func (t *timer) C() <-chan time.Time { return t.ch }

// Stop stops t and drains its channel (Go 1.23 timer semantics).
func (t *timer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	return t.disarm()
}

// Reset re-arms t to fire d from now on its clock.
func (t *timer) Reset(d time.Duration) bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	active := t.disarm()
	t.arm(d)
	return active
}

// arm and disarm run with t.c.mu held.
func (t *timer) arm(d time.Duration) {
	t.target = t.c.now().Add(d)
	t.c.timers[t] = struct{}{}
	t.c.schedule(t)
}

func (t *timer) disarm() bool {
	_, active := t.c.timers[t]
	delete(t.c.timers, t)
	if t.host != nil {
		t.host.Stop()
		t.host = nil
	}
	select {
	case <-t.ch:
	default:
	}
	return active
}
