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
	lin           error
}

// holdThroughFault takes name on a, runs fault, then lets next acquire it.
// The first holder is either told (its Done closes) or, when it keeps the
// lock (a refresh confirmed after the fault), releases it after keep. The
// history of both holders is checked for linearizability.
func holdThroughFault(t *testing.T, a, next *dlock.Locker, name string, fault func(), keep time.Duration, nextOpts ...dlock.Option) faultResult {
	t.Helper()
	ctx := context.Background()
	var h History
	call := time.Now()
	ls, err := a.Acquire(ctx, name, dlock.WithWait(20*time.Second))
	if err != nil {
		t.Fatalf("first holder: %v", err)
	}
	h.Grant(1, ls.Fence(), call, time.Now())
	faulted := time.Now()
	fault()

	type grant struct {
		ls       *dlock.Lease
		call, at time.Time
		aHeld    bool
		err      error
	}
	var releasing atomic.Bool
	got := make(chan grant, 1)
	go func() {
		g := grant{call: time.Now()}
		g.ls, g.err = next.Acquire(ctx, name, append([]dlock.Option{dlock.WithWait(keep + 30*time.Second)}, nextOpts...)...)
		g.at = time.Now()
		g.aHeld = ls.Err() == nil && !releasing.Load()
		got <- g
	}()
	r := faultResult{faulted: faulted}
	select {
	case <-ls.Done():
		at := time.Now()
		h.End(1, at, at)
		r.told = at.Sub(faulted)
	case <-time.After(keep):
		r.kept = true
		releasing.Store(true)
		rc := time.Now()
		_ = ls.Release(ctx)
		h.End(1, rc, time.Now())
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
	r.lin = h.Check()
	return r
}
