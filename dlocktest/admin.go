package dlocktest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
)

// testAdmin checks Inspect, List and ForceRelease on drivers that implement
// driver.Lister and driver.ForceReleaser, and ErrUnsupported on the others.
func (s *suite) testAdmin(t *testing.T) {
	t.Run("InspectList", s.testInspectList)
	t.Run("ForceRelease", s.testForceRelease)
}

func (s *suite) testInspectList(t *testing.T) {
	l := s.locker(t)
	ctx := s.ctx(t)
	if !s.provides(Lister) {
		if _, err := l.List(ctx, ""); !errors.Is(err, dlock.ErrUnsupported) {
			t.Errorf("List on a driver without Lister = %v, want ErrUnsupported", err)
		}
		s.skipLacking(t, Lister)
	}
	prefix := s.name(t) + "/"
	ls := s.acquire(t, l, prefix+"held", dlock.WithOwner(holderOwner), dlock.WithTTL(s.longTTL()))
	defer release(t, ls)
	h, ok, err := l.Inspect(ctx, ls.Name())
	switch {
	case err != nil:
		t.Fatalf("Inspect: %v", err)
	case !ok:
		t.Fatal("Inspect says a held lock is free")
	}
	checkHolder(t, "Inspect", h, ls)
	if _, ok, err := l.Inspect(ctx, prefix+"free"); err != nil || ok {
		t.Errorf("Inspect(free lock) = ok %v, err %v; want false, nil", ok, err)
	}
	hs, err := l.List(ctx, prefix)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if len(hs) != 1 {
		t.Fatalf("List(%q) = %+v, want exactly the one held lock", prefix, hs)
	}
	checkHolder(t, "List", hs[0], ls)
}

func checkHolder(t *testing.T, what string, h dlock.Holder, ls *dlock.Lease) {
	t.Helper()
	if h.Name != ls.Name() || h.Owner != holderOwner || h.Fence != ls.Fence() {
		t.Errorf("%s = %+v, want name %q, owner %q, fence %d", what, h, ls.Name(), holderOwner, ls.Fence())
	}
	if h.TTL > ls.TTL() {
		t.Errorf("%s: TTL left %s exceeds the lease's TTL %s", what, h.TTL, ls.TTL())
	}
}

// testForceRelease evicts a holder: the lock is free at once, the new fence
// exceeds the evicted one, and the evicted holder learns of its loss.
func (s *suite) testForceRelease(t *testing.T) {
	l := s.locker(t)
	ctx := s.ctx(t)
	name := s.name(t)
	if !s.provides(ForceReleaser) {
		if _, _, _, err := l.ForceRelease(ctx, name); !errors.Is(err, dlock.ErrUnsupported) {
			t.Errorf("ForceRelease on a driver without ForceReleaser = %v, want ErrUnsupported", err)
		}
		s.skipLacking(t, ForceReleaser)
	}
	vl := s.locker(t)
	victim := s.acquire(t, vl, name, dlock.WithOwner(holderOwner), dlock.WithTTL(s.stallTTL()))
	// A backend that pushes evictions tells the holder at once; the
	// Locker subscribes in the background when its first lease starts.
	pushes := s.provides(EvictionWatcher)
	if pushes {
		time.Sleep(100 * time.Millisecond)
	}
	evicted, ok, fence, err := l.ForceRelease(ctx, name)
	if err != nil || !ok {
		t.Fatalf("ForceRelease = ok %v, err %v; want the holder evicted", ok, err)
	}
	if evicted.Owner != holderOwner || evicted.Fence != victim.Fence() || fence <= victim.Fence() {
		t.Errorf("ForceRelease = %+v, new fence %d; want owner %q, fence %d, new fence above it", evicted, fence, holderOwner, victim.Fence())
	}
	next, err := l.TryAcquire(ctx, name, s.opts()...)
	if err != nil {
		t.Fatalf("TryAcquire after ForceRelease: %v", err)
	}
	defer release(t, next)
	if next.Fence() <= fence {
		t.Errorf("fence after ForceRelease %d, want > %d", next.Fence(), fence)
	}
	bound := s.stallTTL()/3 + s.slack()
	if pushes {
		bound = s.slack()
	}
	if !done(t, victim, bound) {
		t.Errorf("evicted holder's Done not closed within %s (eviction pushed: %v)", bound, pushes)
	}
	var le *dlock.LostError
	if pushes && (!errors.As(victim.Err(), &le) || le.Reason != dlock.LostForceReleased) {
		t.Errorf("evicted holder's Err = %v, want a LostError saying %q", victim.Err(), dlock.LostForceReleased)
	}
	expectLost(t, victim.Release(context.Background()), "", "evicted holder's Release")
	if _, ok, _, err := l.ForceRelease(ctx, s.name(t, "free")); err != nil || ok {
		t.Errorf("ForceRelease(free lock) = ok %v, err %v; want false, nil", ok, err)
	}
}
