package dlocktest

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
)

// needAdopter skips t when the harness declares the driver lacks
// driver.Adopter, after checking that Resume then says so with
// ErrUnsupported; and when a session-bound backend refuses to adopt with
// ErrUnsupported saying why (a lease that is a connection's).
func (s *suite) needAdopter(t *testing.T) {
	t.Helper()
	l := s.locker(t)
	ls := s.acquire(t, l, s.name(t, "probe"))
	defer release(t, ls)
	adopted, err := s.locker(t).Resume(s.ctx(t), ls.Handle(), s.opts()...)
	switch {
	case !s.provides(Adopter) && errors.Is(err, dlock.ErrUnsupported):
		if why := l.Capabilities().AdoptWhyNot; !strings.Contains(err.Error(), why) {
			t.Errorf("Resume's ErrUnsupported does not say why (Capabilities.AdoptWhyNot %q): %v", why, err)
		}
		s.skipLacking(t, Adopter)
	case !s.provides(Adopter):
		t.Fatalf("Resume on a driver that lacks driver.Adopter = %v, want ErrUnsupported", err)
	case s.h.SessionBound && errors.Is(err, dlock.ErrUnsupported):
		t.Skipf("session-bound backend: %v", err)
	case err != nil:
		t.Fatalf("Resume: %v", err)
	}
	if adopted.Fence() != ls.Fence() {
		t.Errorf("adopted lease's Fence = %d, want the grant's %d", adopted.Fence(), ls.Fence())
	}
	if _, err := adopted.Detach(); err != nil {
		t.Fatalf("Detach: %v", err)
	}
}

// resume resumes handle on l or fails t.
func (s *suite) resume(t *testing.T, l *dlock.Locker, handle string, extra ...dlock.Option) *dlock.Lease {
	t.Helper()
	ls, err := l.Resume(s.ctx(t), handle, s.opts(extra...)...)
	if err != nil {
		t.Fatalf("Resume: %v", err)
	}
	return ls
}

// testAdoptSurvivesGrantor: a lease granted by Locker A and resumed by
// Locker B from its handle is B's: B's watchdog keeps it past several
// TTLs after A stopped refreshing it; its name, kind, owner and fence are
// A's; nobody else can take it; and B's Release frees it.
func (s *suite) testAdoptSurvivesGrantor(t *testing.T) {
	s.needAdopter(t)
	a, b := s.locker(t), s.locker(t)
	name := s.name(t)
	// A never refreshes: once B has resumed, A's process is as good as
	// dead to the backend.
	orig := s.acquire(t, a, name, dlock.WithAutoRefresh(false))
	adopted := s.resume(t, b, orig.Handle())
	checkAdopted(t, orig, adopted)
	if !done(t, orig, s.ttl+s.slack()) {
		t.Fatal("A's unrefreshed lease did not end locally after its TTL")
	}
	// A is not closed here: Close releases the leases it still tracks,
	// and the one A just lost may still be among them for a moment (its
	// token is B's now). Closing a Locker after Detach is AdoptDetach's,
	// a granting process's death AdoptFromKilledProcess's.
	time.Sleep(2 * s.ttl)
	if err := adopted.Err(); err != nil {
		t.Fatalf("adopted lease lost %v after A stopped refreshing: %v", 3*s.ttl, err)
	}
	s.expectHeldElsewhere(t, name)
	if err := adopted.Refresh(s.ctx(t), s.ttl); err != nil {
		t.Fatalf("Refresh of the adopted lease: %v", err)
	}
	release(t, adopted)
	again, err := s.locker(t).TryAcquire(s.ctx(t), name, s.opts()...)
	if err != nil {
		t.Fatalf("TryAcquire after the adopted lease was released: %v", err)
	}
	if again.Fence() <= orig.Fence() {
		t.Errorf("next grant's fence %d, want above the adopted %d", again.Fence(), orig.Fence())
	}
	release(t, again)
}

// checkAdopted checks that adopted stands for the same grant as orig.
func checkAdopted(t *testing.T, orig, adopted *dlock.Lease) {
	t.Helper()
	if adopted.Name() != orig.Name() || adopted.Kind() != orig.Kind() || adopted.Slot() != orig.Slot() {
		t.Errorf("adopted lease is %q %s slot %d, want %q %s slot %d",
			adopted.Name(), adopted.Kind(), adopted.Slot(), orig.Name(), orig.Kind(), orig.Slot())
	}
	if adopted.Fence() != orig.Fence() {
		t.Errorf("adopted lease's Fence = %d, want the grant's %d", adopted.Fence(), orig.Fence())
	}
	if adopted.Owner() != orig.Owner() || adopted.Token() != orig.Token() {
		t.Errorf("adopted lease's Owner = %q, want the grant's %q (or its token differs)", adopted.Owner(), orig.Owner())
	}
	if adopted.Err() != nil {
		t.Errorf("adopted lease's Err = %v, want nil", adopted.Err())
	}
	if !time.Now().Before(adopted.Expires()) {
		t.Errorf("adopted lease's Expires %v is not in the future", adopted.Expires())
	}
}

// testAdoptDetach: a lease detached from Locker A (Detach) ends there
// without a release, and Locker B resumes it; closing A leaves it alone,
// and A's Release of it reports ErrDetached without touching B's lock.
func (s *suite) testAdoptDetach(t *testing.T) {
	s.needAdopter(t)
	a, b := s.locker(t), s.locker(t)
	name := s.name(t)
	orig := s.acquire(t, a, name)
	handle, err := orig.Detach()
	if err != nil {
		t.Fatalf("Detach: %v", err)
	}
	if !done(t, orig, time.Second) || !errors.Is(orig.Err(), dlock.ErrDetached) {
		t.Fatalf("after Detach: Done not closed or Err = %v, want ErrDetached", orig.Err())
	}
	adopted := s.resume(t, b, handle)
	checkAdopted(t, orig, adopted)
	if err := orig.Release(context.Background()); !errors.Is(err, dlock.ErrDetached) {
		t.Errorf("A's Release after Detach = %v, want ErrDetached", err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("closing A's Locker: %v", err)
	}
	time.Sleep(2 * s.ttl)
	if err := adopted.Err(); err != nil {
		t.Fatalf("adopted lease lost after A detached it and closed: %v", err)
	}
	s.expectHeldElsewhere(t, name)
	release(t, adopted)
}

// testAdoptRefused: a handle whose lease was released, expired, or taken
// over by another holder is refused with ErrLost, and the lock's current
// holder keeps it; so is a handle whose token was altered.
func (s *suite) testAdoptRefused(t *testing.T) {
	s.needAdopter(t)
	l, other := s.locker(t), s.locker(t)
	name := s.name(t)

	first := s.acquire(t, l, name)
	released := first.Handle()
	release(t, first)
	s.expectLost(t, other, released, "released")

	// A later holder's lock must survive the old handle.
	second := s.acquire(t, l, name)
	s.expectLost(t, other, released, "released, with the lock held by another token")
	if err := second.Refresh(s.ctx(t), s.ttl); err != nil {
		t.Fatalf("the holder's Refresh after an old handle was refused: %v", err)
	}
	s.expectHeldElsewhere(t, name)
	release(t, second)

	if !s.h.SessionBound {
		lapsed := s.acquire(t, l, name, dlock.WithAutoRefresh(false))
		if !done(t, lapsed, s.ttl+s.slack()) {
			t.Fatal("unrefreshed lease did not end after its TTL")
		}
		time.Sleep(s.ttl / 2) // past the backend's expiry, beyond the drift margin
		s.expectLost(t, other, lapsed.Handle(), "expired")
	}
}

// expectLost checks that Resume(handle) is refused with ErrLost.
func (s *suite) expectLost(t *testing.T, l *dlock.Locker, handle, what string) {
	t.Helper()
	ls, err := l.Resume(s.ctx(t), handle, s.opts()...)
	if err == nil {
		release(t, ls)
		t.Fatalf("Resume of a handle whose lease was %s succeeded", what)
	}
	if !errors.Is(err, dlock.ErrLost) {
		t.Fatalf("Resume of a handle whose lease was %s = %v, want ErrLost", what, err)
	}
}

// testAdoptKinds: a semaphore permit, a read and a write grant of a
// read-write lock, and an election term each round-trip through a handle
// (detached from a Locker that is then closed) with their kind, slot and
// fence, exclude the grants they exclude while the adopter holds them,
// and are freed by its Release.
func (s *suite) testAdoptKinds(t *testing.T) {
	s.needAdopter(t)
	s.needLister(t)
	grant := s.grantKind
	// Each kind, and the kind of grant it excludes.
	for _, k := range []struct{ kind, excludes dlock.Kind }{
		{dlock.KindPermit, dlock.KindPermit},
		{dlock.KindRead, dlock.KindWrite},
		{dlock.KindWrite, dlock.KindRead},
		{dlock.KindLeader, dlock.KindLeader},
	} {
		t.Run(string(k.kind), func(t *testing.T) {
			if k.kind == dlock.KindRead || k.kind == dlock.KindWrite {
				s.needRWMutex(t)
			}
			a, b, c := s.locker(t), s.locker(t), s.locker(t)
			name := s.name(t)
			orig, err := grant(t, a, name, k.kind)
			if err != nil {
				t.Fatalf("grant: %v", err)
			}
			if orig.Kind() != k.kind {
				t.Fatalf("grant's Kind = %s, want %s", orig.Kind(), k.kind)
			}
			handle, err := orig.Detach()
			if err != nil {
				t.Fatalf("Detach: %v", err)
			}
			if err := a.Close(); err != nil {
				t.Fatalf("closing A's Locker: %v", err)
			}
			adopted := s.resume(t, b, handle)
			checkAdopted(t, orig, adopted)
			if other, err := grant(t, c, name, k.excludes); err == nil {
				t.Fatalf("a third Locker got %s slot %d while the adopted %s was held", other.Kind(), other.Slot(), k.kind)
			} else if !errors.Is(err, dlock.ErrNotAcquired) {
				t.Fatalf("a third Locker's %s grant = %v, want ErrNotAcquired", k.excludes, err)
			}
			release(t, adopted)
			next, err := grant(t, c, name, k.excludes)
			if err != nil {
				t.Fatalf("%s grant after the adopted %s was released: %v", k.excludes, k.kind, err)
			}
			release(t, next)
		})
	}
}

// grantKind takes a grant of kind on name through l, without waiting.
func (s *suite) grantKind(t *testing.T, l *dlock.Locker, name string, kind dlock.Kind) (*dlock.Lease, error) {
	switch kind {
	case dlock.KindPermit:
		return s.semaphore(t, l, name).TryAcquire(s.ctx(t))
	case dlock.KindRead:
		return s.rwmutex(t, l, name).RLock(s.ctx(t))
	case dlock.KindWrite:
		return s.rwmutex(t, l, name).Lock(s.ctx(t))
	}
	e, err := l.Election(name, s.opts()...)
	if err != nil {
		t.Fatal(err)
	}
	return e.Campaign(s.ctx(t), "", s.opts(dlock.WithWait(0))...)
}

// semaphore is a one-permit semaphore name on l, whose acquires do not
// wait.
func (s *suite) semaphore(t *testing.T, l *dlock.Locker, name string) *dlock.Semaphore {
	t.Helper()
	m, err := l.Semaphore(name, 1, s.opts(dlock.WithWait(0))...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// rwmutex is the read-write lock name on l, whose acquires do not wait.
func (s *suite) rwmutex(t *testing.T, l *dlock.Locker, name string) *dlock.RWMutex {
	t.Helper()
	m, err := l.RWMutex(name, s.opts(dlock.WithWait(0))...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// testAdoptFromKilledProcess: a child process takes a lock, keeps it
// with its watchdog and passes its handle on; this process resumes it,
// and keeps it for 3 TTLs after the child is SIGKILLed, with the child's
// fence, nobody else able to take it; its Release frees it.
func (s *suite) testAdoptFromKilledProcess(t *testing.T) {
	s.needProcesses(t)
	s.needAdopter(t)
	name := s.name(t)
	c := s.startChild(t, childSpec{Role: roleHandOn, Names: []string{name}})
	var fence uint64
	var handle string
	if line := c.line(t, time.Minute); !scanHandle(line, &fence, &handle) {
		t.Fatalf("child said %q, want \"handle FENCE HANDLE\"; stderr:\n%s", strings.Fields(line + " ")[0], c.stderr.String())
	}
	adopted := s.resume(t, s.locker(t), handle)
	if adopted.Fence() != fence {
		t.Errorf("adopted lease's Fence = %d, want the child's %d", adopted.Fence(), fence)
	}
	c.kill()
	time.Sleep(3 * s.ttl)
	if err := adopted.Err(); err != nil {
		t.Fatalf("adopted lease lost after its granting process was SIGKILLed: %v", err)
	}
	s.expectHeldElsewhere(t, name)
	release(t, adopted)
	again, err := s.locker(t).TryAcquire(s.ctx(t), name, s.opts()...)
	if err != nil {
		t.Fatalf("TryAcquire after the adopted lease was released: %v", err)
	}
	release(t, again)
}

// scanHandle reads a handOn child's "handle FENCE HANDLE" line.
func scanHandle(line string, fence *uint64, handle *string) bool {
	f := strings.Fields(line)
	if len(f) != 3 || f[0] != "handle" {
		return false
	}
	n, err := strconv.ParseUint(f[1], 10, 64)
	*fence, *handle = n, f[2]
	return err == nil
}
