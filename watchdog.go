package dlock

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/dlockdev/dlock/driver"
)

// watchdog keeps a Locker's leases alive. One goroutine per Locker, running only
// while the Locker has live leases, tracks every lease's schedule:
//
//   - an auto-refreshed lease is refreshed a third of its TTL after its
//     last confirmed (re)grant; leases coming due within a twelfth of their
//     TTL of each other are refreshed together, in one call when the
//     driver is a driver.BatchRefresher;
//   - a refresh refused by the backend loses the lease at once;
//   - a refresh that fails for a transport reason is retried every
//     TTL/12, and if no refresh has been confirmed while a third of the TTL
//     is still left the lease is declared lost (LostUnconfirmed): the
//     holder hears of it before the backend can give the lock to anyone
//     else;
//   - a lease without auto-refresh is lost at its Expires time.
type watchdog struct {
	drv   driver.Driver
	clock Clock
	// releaseLost frees, on the backend, a lease given up as lost
	// (Locker.releaseLost).
	releaseLost func(name, token string, ttl time.Duration)

	mu      sync.Mutex
	sched   map[*Lease]*schedule
	running bool
	// wakeAt is when the loop's timer fires next: a lease due no earlier
	// needs no wake-up, so that taking and releasing leases does not make
	// the loop rescan every lease each time.
	wakeAt time.Time
	wake   chan struct{}
	// idle wakes the loop watchdogLinger after the last lease went, so
	// that it lingers and exits on time: a timer rather than a wake-up at
	// each release, which a Locker taking one short lease after another
	// would pay every time.
	idle *time.Timer
	stop chan struct{} // closed by Locker.Close
	wg   sync.WaitGroup
}

type schedule struct {
	ttl       time.Duration
	refreshAt time.Time // zero for leases without auto-refresh
	lossAt    time.Time
	inflight  bool
	retrying  bool  // refreshAt is a retry after a transport failure
	lastErr   error // the last transport failure, the cause of a loss
}

// maxBatch bounds one batched refresh call.
const maxBatch = 1000

func newWatchdog(drv driver.Driver, clock Clock, releaseLost func(name, token string, ttl time.Duration)) *watchdog {
	wd := &watchdog{drv: drv, clock: clock, releaseLost: releaseLost, sched: map[*Lease]*schedule{}, wake: make(chan struct{}, 1), stop: make(chan struct{})}
	wd.idle = time.AfterFunc(time.Hour, wd.poke)
	wd.idle.Stop()
	return wd
}

func (wd *watchdog) add(ls *Lease) {
	s := scheduleFor(ls)
	wd.mu.Lock()
	if len(wd.sched) == 0 {
		wd.idle.Stop()
	}
	wd.sched[ls] = s
	start := !wd.running
	if start {
		wd.running = true
		wd.wg.Add(1)
		go wd.loop()
	}
	due := wd.wakeAt.IsZero() || s.due().Before(wd.wakeAt)
	wd.mu.Unlock()
	if start || due {
		wd.poke()
	}
}

// due is the earliest time the loop must look at s.
func (s *schedule) due() time.Time {
	if s.refreshAt.IsZero() {
		return s.lossAt
	}
	return earliest(s.refreshAt, s.lossAt) // as scan computes its next wake-up
}

func scheduleFor(ls *Lease) *schedule {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	// The window is the TTL, or a provisional grant's shorter window
	// until its first refresh: refreshed within a third of it, lost with
	// a third left.
	w := ls.window
	s := &schedule{ttl: w, lossAt: ls.expires}
	if ls.auto {
		granted := ls.expires.Add(-(w - driver.ClockDrift(w)))
		s.refreshAt = granted.Add(w / 3)
		s.lossAt = ls.expires.Add(-w / 3)
	}
	return s
}

// reschedule recomputes ls's schedule after a confirmed refresh.
// A confirmed refresh only moves the lease's times later, so the loop
// needs no wake-up (the watchdog's refresh wakes it once per batch).
func (wd *watchdog) reschedule(ls *Lease) {
	wd.mu.Lock()
	if _, ok := wd.sched[ls]; ok {
		wd.sched[ls] = scheduleFor(ls)
	}
	wd.mu.Unlock()
}

// remove forgets ls: the loop's next scan skips it. When no lease is
// left, the idle timer wakes the loop watchdogLinger later (unless a new
// lease came meanwhile), so that it lingers and exits on time.
func (wd *watchdog) remove(ls *Lease) {
	wd.mu.Lock()
	delete(wd.sched, ls)
	if len(wd.sched) == 0 {
		wd.idle.Reset(watchdogLinger)
	}
	wd.mu.Unlock()
}

func (wd *watchdog) poke() {
	select {
	case wd.wake <- struct{}{}:
	default:
	}
}

// close stops the loop and waits until it and every refresh in flight
// have returned. No lease is added after close (Locker.track refuses).
func (wd *watchdog) close() {
	wd.idle.Stop()
	close(wd.stop)
	wd.wg.Wait()
}

// watchdogLinger is how long the loop stays up without leases, so that a
// Locker taking short leases one after another does not start and stop a
// goroutine for each of them.
const watchdogLinger = 200 * time.Millisecond

// linger waits, with no lease to keep, for a new one (true) or for the
// linger time or Close to pass (false: the loop must exit). The end of
// the linger is the loop's next wake-up: a lease added meanwhile that is
// due no earlier wakes nobody (a Locker taking one short lease after
// another then costs no goroutine wake-up per lease).
func (wd *watchdog) linger(timer Timer) bool {
	wd.mu.Lock()
	if len(wd.sched) == 0 {
		wd.wakeAt = wd.clock.Now().Add(watchdogLinger)
	}
	wd.mu.Unlock()
	timer.Reset(watchdogLinger)
	select {
	case <-wd.wake:
		return true
	case <-timer.C():
	case <-wd.stop:
	}
	wd.mu.Lock()
	defer wd.mu.Unlock()
	if len(wd.sched) > 0 {
		return true
	}
	wd.running = false
	return false
}

func (wd *watchdog) loop() {
	defer wd.wg.Done()
	defer wd.watchEvictions()()
	timer := wd.clock.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := wd.clock.Now()
		due, lost, next, ok := wd.scan(now)
		if !ok {
			if wd.linger(timer) {
				continue
			}
			return
		}
		for ls, cause := range lost {
			wd.declareLost(ls, cause)
		}
		for len(due) > 0 {
			n := min(len(due), maxBatch)
			wd.wg.Add(1)
			go wd.refresh(due[:n])
			due = due[n:]
		}
		timer.Reset(next.Sub(now))
		select {
		case <-timer.C():
		case <-wd.wake:
		case <-wd.stop: // Close has ended every lease
			wd.mu.Lock()
			wd.running = false
			wd.mu.Unlock()
			return
		}
	}
}

// scan picks the leases to refresh and to declare lost, and when to look
// again. ok is false (and the loop must exit) when no lease is left.
func (wd *watchdog) scan(now time.Time) (due []*Lease, lost map[*Lease]error, next time.Time, ok bool) {
	wd.mu.Lock()
	defer wd.mu.Unlock()
	if len(wd.sched) == 0 {
		wd.wakeAt = time.Time{}
		return nil, nil, time.Time{}, false
	}
	defer func() { wd.wakeAt = next }()
	next = now.Add(time.Hour)
	for ls, s := range wd.sched {
		if !now.Before(s.lossAt) {
			if lost == nil {
				lost = map[*Lease]error{}
			}
			lost[ls] = s.lastErr
			delete(wd.sched, ls)
			continue
		}
		next = earliest(next, s.lossAt)
		if s.refreshAt.IsZero() || s.inflight {
			continue
		}
		// Refreshes come due up to TTL/12 early, to batch neighbours;
		// a retry does not, or it would be due again at once (hot loop).
		early := s.ttl / 12
		if s.retrying {
			early = 0
		}
		if !now.Add(early).Before(s.refreshAt) {
			s.inflight = true
			due = append(due, ls)
			continue
		}
		next = earliest(next, s.refreshAt)
	}
	return due, lost, next, true
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// refresh renews a batch of leases and records each outcome.
func (wd *watchdog) refresh(batch []*Lease) {
	defer wd.wg.Done()
	sent := wd.clock.Now()
	// The deadline is on wd.clock; the context's timer runs on the host's.
	ctx, cancel := context.WithTimeout(context.Background(), wd.deadline(batch).Sub(sent))
	defer cancel()
	results := wd.send(ctx, batch)
	for i, ls := range batch {
		err := results[i]
		if err != nil && !errors.Is(err, driver.ErrNotHeld) {
			wd.retryLater(ls, err)
			continue
		}
		// Record the outcome (a new schedule) before clearing inflight, so
		// that a scan in between does not see the old, due, refreshAt.
		_ = ls.refreshed(sent, ls.TTL(), err)
		wd.clearInflight(ls)
	}
	wd.poke()
}

func (wd *watchdog) deadline(batch []*Lease) time.Time {
	wd.mu.Lock()
	defer wd.mu.Unlock()
	d := wd.clock.Now().Add(time.Hour)
	for _, ls := range batch {
		if s, ok := wd.sched[ls]; ok {
			d = earliest(d, s.lossAt)
		}
	}
	return d
}

// send refreshes batch in one call if the driver batches, else one call per
// lease, concurrently. results[i] belongs to batch[i].
func (wd *watchdog) send(ctx context.Context, batch []*Lease) []error {
	drv := wd.drv
	if br, ok := drv.(driver.BatchRefresher); ok && len(batch) > 1 {
		items := make([]driver.RefreshItem, len(batch))
		for i, ls := range batch {
			items[i] = driver.RefreshItem{Name: ls.name, Token: ls.token, TTL: ls.TTL()}
		}
		results, err := br.RefreshBatch(ctx, items)
		if err != nil || len(results) != len(batch) {
			if err == nil {
				err = errors.New("driver returned a short batch")
			}
			results = make([]error, len(batch))
			for i := range results {
				results[i] = err
			}
		}
		return results
	}
	results := make([]error, len(batch))
	var wg sync.WaitGroup
	for i, ls := range batch {
		wg.Go(func() { results[i] = drv.Refresh(ctx, ls.name, ls.token, ls.TTL()) })
	}
	wg.Wait()
	return results
}

func (wd *watchdog) clearInflight(ls *Lease) {
	wd.mu.Lock()
	if s, ok := wd.sched[ls]; ok {
		s.inflight = false
	}
	wd.mu.Unlock()
}

// retryLater schedules another attempt after a transport failure.
func (wd *watchdog) retryLater(ls *Lease, err error) {
	wd.mu.Lock()
	defer wd.mu.Unlock()
	if s, ok := wd.sched[ls]; ok {
		s.inflight = false
		s.lastErr = err
		s.retrying = true
		s.refreshAt = wd.clock.Now().Add(max(s.ttl/12, time.Millisecond))
	}
}

// declareLost ends a lease whose refresh could not be confirmed in time,
// and has the backend release it as soon as it answers again: a refresh
// still in flight may land late and extend it (see Locker.releaseLost).
func (wd *watchdog) declareLost(ls *Lease, cause error) {
	ls.lose(LostUnconfirmed, cause)
	if ls.auto && !ls.releasing() {
		wd.releaseLost(ls.name, ls.token, ls.TTL())
	}
}
