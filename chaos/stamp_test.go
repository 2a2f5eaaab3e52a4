package chaos

import (
	"sync"
	"time"

	"github.com/dlockdev/dlock"
)

// endStamps stamps the end of a Locker's leases where it happens. A
// history is only as good as its stamps: a holder's end stamped when the
// test's goroutine gets round to it, rather than when the lease ended, can
// fall after the next holder's grant and make a correct history look like
// two holders at once (a few milliseconds suffice on a loaded machine).
//
// Two stamps are taken, and the earlier kept: an Ended hook, which the
// Locker calls on the goroutine that ended the lease right after Done
// closed and before that goroutine does anything else — a lease the
// watchdog gives up is released on the backend only after it — and a
// goroutine blocked on Done. Both are at or after the moment Done closed,
// never before.
type endStamps struct {
	mu sync.Mutex
	at map[*dlock.Lease]chan time.Time
}

// stampers holds the endStamps of every Locker stampEnds has hooked.
var stampers sync.Map // *dlock.Locker → *endStamps

// stampEnds returns l's endStamps, hooking l the first time: the leases
// of acquire calls that start afterwards are stamped.
func stampEnds(l *dlock.Locker) *endStamps {
	if e, ok := stampers.Load(l); ok {
		return e.(*endStamps)
	}
	e, loaded := stampers.LoadOrStore(l, &endStamps{at: map[*dlock.Lease]chan time.Time{}})
	if !loaded {
		l.AddHooks(dlock.Hooks{Ended: e.(*endStamps).ended})
	}
	return e.(*endStamps)
}

// ended is the Ended hook: the stamp comes first.
func (e *endStamps) ended(ev dlock.EndEvent) {
	now := time.Now()
	e.slot(ev.Lease) <- now
}

// slot is ls's one-stamp mailbox (a lease ends once).
func (e *endStamps) slot(ls *dlock.Lease) chan time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	ch, ok := e.at[ls]
	if !ok {
		ch = make(chan time.Time, 1)
		e.at[ls] = ch
	}
	return ch
}

func (e *endStamps) forget(ls *dlock.Lease) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.at, ls)
}

// hookWait bounds how long endedAt waits for the Ended hook once Done
// has closed; the hook runs right after, so this is only a guard.
const hookWait = 10 * time.Second

// endedAt returns a channel that receives when ls ended (released or
// lost): the earlier of the two stamps, plus lateEnd (zero but for the
// suite's self-check, DLOCK_CHAOS_LATE_END). ls must come from an acquire
// call made after stampEnds hooked its Locker.
func (e *endStamps) endedAt(ls *dlock.Lease) <-chan time.Time {
	out := make(chan time.Time, 1)
	go func() {
		<-ls.Done()
		woke := time.Now()
		at := woke
		select {
		case hook := <-e.slot(ls):
			if hook.Before(at) {
				at = hook
			}
		case <-time.After(hookWait):
		}
		e.forget(ls)
		out <- at.Add(lateEnd)
	}()
	return out
}
