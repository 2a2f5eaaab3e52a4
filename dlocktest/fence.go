package dlocktest

import (
	"testing"

	"github.com/dlockdev/dlock"
)

// fences tracks the highest fence seen for one name.
type fences struct {
	t      *testing.T
	s      *suite
	name   string
	l1, l2 *dlock.Locker
	last   uint64
}

// next checks that fence f exceeds every fence seen before.
func (f *fences) next(step string, fence uint64) {
	f.t.Helper()
	if fence <= f.last {
		f.t.Errorf("after %s: fence %d, want > %d", step, fence, f.last)
	}
	f.last = fence
}

// testFencesIncrease checks that every grant of a name gets a fence
// strictly greater than every earlier grant's: across release, expiry,
// deletion from outside, takeover and force-release.
func (s *suite) testFencesIncrease(t *testing.T) {
	f := &fences{t: t, s: s, name: s.name(t), l1: s.locker(t), l2: s.locker(t)}
	f.acrossRelease()
	if !s.h.SessionBound {
		f.acrossExpiry()
	}
	if s.h.Expire != nil {
		f.acrossDeletion()
	}
	if s.h.Steal != nil && s.h.Expire != nil {
		f.acrossSteal()
	}
	if f.s.provides(ForceReleaser) {
		f.acrossForceRelease()
	}
}

func (f *fences) acrossRelease() {
	for i := range 3 {
		ls := f.s.acquire(f.t, []*dlock.Locker{f.l1, f.l2}[i%2], f.name)
		f.next("release", ls.Fence())
		release(f.t, ls)
	}
}

// acrossExpiry: A's lease runs out by TTL and B takes the lock.
func (f *fences) acrossExpiry() {
	a := f.s.acquire(f.t, f.l1, f.name, dlock.WithAutoRefresh(false))
	f.next("release", a.Fence())
	waitDone(f.t, a, f.s.ttl+f.s.slack())
	b := f.s.acquire(f.t, f.l2, f.name, dlock.WithWait(f.s.ttl+f.s.slack()))
	f.next("expiry", b.Fence())
	release(f.t, b)
}

// acrossDeletion: A's lock is deleted from outside and B takes it.
func (f *fences) acrossDeletion() {
	a := f.s.acquire(f.t, f.l1, f.name, dlock.WithTTL(f.s.longTTL()))
	f.next("release", a.Fence())
	f.s.h.Expire(f.t, f.name)
	b := f.s.acquire(f.t, f.l2, f.name, dlock.WithWait(f.s.ttl+f.s.slack()))
	f.next("deletion from outside", b.Fence())
	_ = a.Release(f.s.ctx(f.t))
	release(f.t, b)
}

// acrossSteal: a foreign holder takes the lock over, its lock is then
// deleted, and B takes it; B's fence must exceed both earlier ones.
func (f *fences) acrossSteal() {
	a := f.s.acquire(f.t, f.l1, f.name, dlock.WithTTL(f.s.longTTL()), dlock.WithAutoRefresh(false))
	f.next("deletion from outside", a.Fence())
	f.s.h.Steal(f.t, f.name)
	if h, ok, err := f.l2.Inspect(f.s.ctx(f.t), f.name); err == nil && ok {
		f.next("takeover (the thief's fence)", h.Fence)
	}
	f.s.h.Expire(f.t, f.name)
	b := f.s.acquire(f.t, f.l2, f.name, dlock.WithWait(f.s.ttl+f.s.slack()))
	f.next("takeover", b.Fence())
	_ = a.Release(f.s.ctx(f.t))
	release(f.t, b)
}

// acrossForceRelease: ForceRelease raises the fence past the evicted
// holder, and the next grant's fence exceeds that.
func (f *fences) acrossForceRelease() {
	a := f.s.acquire(f.t, f.l1, f.name, dlock.WithTTL(f.s.longTTL()))
	f.next("an earlier step", a.Fence())
	evicted, held, fence, err := f.l2.ForceRelease(f.s.ctx(f.t), f.name)
	switch {
	case err != nil:
		f.t.Fatalf("ForceRelease: %v", err)
	case !held || evicted.Fence != a.Fence():
		f.t.Errorf("ForceRelease evicted %+v (held %v), want the holder with fence %d", evicted, held, a.Fence())
	}
	f.next("force-release (its new fence)", fence)
	b := f.s.acquire(f.t, f.l2, f.name, dlock.WithWait(f.s.ttl+f.s.slack()))
	f.next("force-release", b.Fence())
	release(f.t, b)
}
