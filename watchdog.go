package dlock

import (
	"container/heap"
	"sync"
	"time"

	"github.com/dlockdev/dlock/driver"
)

// watchdog keeps a Locker's leases alive. One goroutine per Locker, running only
// while the Locker has live leases, tracks every lease's schedule, in a
// heap by due time (dueQueue):
//
//   - an auto-refreshed lease is refreshed a third of its TTL after its
//     last confirmed (re)grant; leases coming due within a twelfth of their
//     TTL of each other are refreshed together, in one call when the
//     driver is a driver.BatchRefresher, by at most maxRefreshCalls
//     calls at a time; while they are behind, the Locker's new
//     acquisitions wait (watchdog_refresh.go);
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

	mu    sync.Mutex
	sched map[*Lease]*schedule
	queue dueQueue // the schedules of sched, by due time
	// pending holds the leases due for a refresh that no call carries
	// yet, oldest first; callers counts the goroutines sending them
	// (watchdog_refresh.go).
	pending []*Lease
	callers int
	backlog chan struct{} // closed when the refreshes catch up
	// visits counts the schedules scan took from the queue, for tests:
	// a scan must not walk the leases that have nothing due.
	visits  int64
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
	ls        *Lease
	at        int // index in the watchdog's queue, -1 when out of it
	ttl       time.Duration
	refreshAt time.Time // zero for leases without auto-refresh
	lossAt    time.Time
	inflight  bool
	retrying  bool  // refreshAt is a retry after a transport failure
	lastErr   error // the last transport failure, the cause of a loss
}

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
	if old, ok := wd.sched[ls]; ok {
		wd.queue.remove(old)
	}
	wd.sched[ls] = s
	heap.Push(&wd.queue, s)
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

// due is the earliest time the loop must look at s: its refresh, or
// its loss time when it is not refreshed or its refresh is in flight.
func (s *schedule) due() time.Time {
	if s.refreshAt.IsZero() || s.inflight {
		return s.lossAt
	}
	return earliest(s.refreshAt, s.lossAt)
}

// early is how long before its refresh time s may be refreshed, with
// neighbours coming due soon after: TTL/12, and none for a retry, which
// would otherwise be due again at once (a hot loop).
func (s *schedule) early() time.Duration {
	if s.retrying {
		return 0
	}
	return s.ttl / 12
}

func scheduleFor(ls *Lease) *schedule {
	s := &schedule{ls: ls, at: -1}
	s.reset()
	return s
}

// reset computes s's times afresh from its lease, in no state (neither
// in flight nor retrying).
func (s *schedule) reset() {
	ls := s.ls
	ls.mu.Lock()
	defer ls.mu.Unlock()
	// The window is the TTL, or a provisional grant's shorter window
	// until its first refresh: refreshed within a third of it, lost with
	// a third left.
	w := ls.window
	s.ttl, s.lossAt, s.refreshAt = w, ls.expires, time.Time{}
	s.inflight, s.retrying, s.lastErr = false, false, nil
	if ls.auto {
		granted := ls.expires.Add(-(w - driver.ClockDrift(w)))
		s.refreshAt = granted.Add(w / 3)
		s.lossAt = ls.expires.Add(-w / 3)
	}
}

// reschedule recomputes ls's schedule after a confirmed refresh.
// A confirmed refresh only moves the lease's times later, so the loop
// needs no wake-up (the watchdog's refresh wakes it once per batch).
func (wd *watchdog) reschedule(ls *Lease) {
	wd.mu.Lock()
	if s, ok := wd.sched[ls]; ok {
		s.reset()
		wd.queue.fix(s)
	}
	wd.mu.Unlock()
}

// remove forgets ls: the loop's next scan skips it. When no lease is
// left, the idle timer wakes the loop watchdogLinger later (unless a new
// lease came meanwhile), so that it lingers and exits on time.
func (wd *watchdog) remove(ls *Lease) {
	wd.mu.Lock()
	if s, ok := wd.sched[ls]; ok {
		wd.queue.remove(s)
		delete(wd.sched, ls)
	}
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
		wd.enqueue(due)
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
// again. ok is false (and the loop must exit) when no lease is left. It
// visits the queue from its top, only as far as leases are due: lost, or
// due for a refresh, which comes up to TTL/12 early (schedule.early) to
// batch neighbours. A lease whose refresh is sent goes back into the
// queue at its loss time; so do leases near their due time with nothing
// to do yet (a refresh in flight, a loss time not reached).
func (wd *watchdog) scan(now time.Time) (due []*Lease, lost map[*Lease]error, next time.Time, ok bool) {
	wd.mu.Lock()
	defer wd.mu.Unlock()
	if len(wd.sched) == 0 {
		wd.wakeAt = time.Time{}
		return nil, nil, time.Time{}, false
	}
	var back []*schedule
	for len(wd.queue) > 0 {
		s := wd.queue[0]
		if now.Add(s.early()).Before(s.due()) {
			break // nothing below the top is due sooner
		}
		heap.Pop(&wd.queue)
		wd.visits++
		if !now.Before(s.lossAt) {
			if lost == nil {
				lost = map[*Lease]error{}
			}
			lost[s.ls] = s.lastErr
			delete(wd.sched, s.ls)
			continue
		}
		back = append(back, s)
		if s.refreshAt.IsZero() || s.inflight || now.Add(s.early()).Before(s.refreshAt) {
			continue
		}
		s.inflight = true
		due = append(due, s.ls)
	}
	for _, s := range back {
		heap.Push(&wd.queue, s)
	}
	if len(wd.sched) == 0 {
		// Every lease was lost: look again at once, to linger and exit.
		wd.wakeAt = time.Time{}
		return due, lost, now, true
	}
	next = wd.queue.next(now)
	wd.wakeAt = next
	return due, lost, next, true
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
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
