package chaos

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
)

// faultResult is the outcome of one holdThroughFault trial.
type faultResult struct {
	first, second uint64        // the fences
	fenceBack     bool          // second <= first
	overlap       bool          // the next holder was granted while the first still believed
	kept          bool          // the first holder was never told, and released
	faulted       time.Time     // when fault was called
	told          time.Duration // fault→first holder told
	next          time.Duration // fault→next grant
	// doubled is how long the first holder was told after the next grant
	// returned; zero when it was told first or kept the lock.
	doubled time.Duration
	history *History
	lin     error
}

// holdThroughFault takes name on a, runs fault, then lets next acquire it.
// The first holder is either told (its Done closes) or, when it keeps the
// lock (a refresh confirmed after the fault), releases it after keep. The
// history of both holders is checked for linearizability; every event is
// stamped where it happens: a grant right after its Acquire returns, a
// loss by endStamps.
func holdThroughFault(t *testing.T, a, next *dlock.Locker, name string, fault func(), keep time.Duration, nextOpts ...dlock.Option) faultResult {
	t.Helper()
	ctx := context.Background()
	stamps := stampEnds(a)
	h := new(History)
	call := time.Now()
	ls, err := a.Acquire(ctx, name, dlock.WithWait(20*time.Second))
	ret := time.Now()
	if err != nil {
		t.Fatalf("first holder: %v", err)
	}
	h.Grant(1, ls.Fence(), call, ret)
	ended := stamps.endedAt(ls)
	faulted := time.Now()
	fault()

	var releasing atomic.Bool
	got := make(chan nextGrant, 1)
	go func() { got <- takeNext(ctx, next, name, ls, &releasing, keep, nextOpts) }()
	r := faultResult{faulted: faulted, history: h}
	var end time.Time
	select {
	case end = <-ended:
		h.End(1, end, end)
		r.told = end.Sub(faulted)
	case <-time.After(keep):
		r.kept = true
		releasing.Store(true)
		rc := time.Now()
		_ = ls.Release(ctx)
		// Lost just before the release, the holding ended at the loss.
		end = <-ended
		h.End(1, earliest(rc, end), end)
	}
	g := <-got
	if g.err != nil {
		t.Fatalf("next holder: %v", g.err)
	}
	h.Grant(2, g.ls.Fence(), g.call, g.at)
	rc := time.Now()
	_ = g.ls.Release(ctx)
	h.End(2, rc, time.Now())
	r.first, r.second = ls.Fence(), g.ls.Fence()
	r.fenceBack = r.second <= r.first
	r.overlap = g.aHeld
	r.next = g.at.Sub(faulted)
	if !r.kept && end.After(g.at) {
		r.doubled = end.Sub(g.at)
	}
	r.lin = h.Check()
	return r
}

// nextGrant is the next holder's grant in holdThroughFault.
type nextGrant struct {
	ls       *dlock.Lease
	call, at time.Time
	aHeld    bool // the first holder still believed when it returned
	err      error
}

// takeNext acquires name on next; first is the lease it waits behind.
func takeNext(ctx context.Context, next *dlock.Locker, name string, first *dlock.Lease, releasing *atomic.Bool, keep time.Duration, opts []dlock.Option) nextGrant {
	g := nextGrant{call: time.Now()}
	g.ls, g.err = next.Acquire(ctx, name, append([]dlock.Option{dlock.WithWait(keep + 30*time.Second)}, opts...)...)
	g.at = time.Now()
	g.aHeld = first.Err() == nil && !releasing.Load()
	return g
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
