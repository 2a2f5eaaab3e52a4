package dlocktest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
)

// Semaphore contention sizes.
const (
	semPermits    = 3
	semGoroutines = 12
	semRounds     = 4
)

// gauge counts callers inside and remembers the most at once.
type gauge struct{ inside, most atomic.Int64 }

func (g *gauge) enter() {
	n := g.inside.Add(1)
	for m := g.most.Load(); n > m && !g.most.CompareAndSwap(m, n); m = g.most.Load() {
	}
}

func (g *gauge) leave() { g.inside.Add(-1) }

// grant is one permit or term seen by a test, for checking fences.
type grant struct {
	slot  int
	fence uint64
	at    time.Time
}

// testSemaphoreLimit has 12 goroutines on 3 Lockers take a 3-permit
// semaphore 4 times each: never more than 3 inside, 3 inside at some point,
// every lease a permit with a slot in range, and each permit's fences
// strictly increasing in grant order.
func (s *suite) testSemaphoreLimit(t *testing.T) {
	s.needLister(t)
	name := s.name(t)
	sems := make([]*dlock.Semaphore, exclLockers-1)
	for i := range sems {
		sem, err := s.locker(t).Semaphore(name, semPermits, s.contendOpts()...)
		if err != nil {
			t.Fatal(err)
		}
		sems[i] = sem
	}
	var g gauge
	var mu sync.Mutex
	var grants []grant
	var wg sync.WaitGroup
	ctx := s.ctx(t)
	for i := range semGoroutines {
		sem := sems[i%len(sems)]
		wg.Go(func() {
			for range semRounds {
				ls, err := sem.Acquire(ctx)
				if err != nil {
					t.Errorf("Acquire: %v", err)
					return
				}
				g.enter()
				mu.Lock()
				grants = append(grants, grant{ls.Slot(), ls.Fence(), time.Now()})
				mu.Unlock()
				if ls.Kind() != dlock.KindPermit || ls.Name() != name || ls.Slot() < 0 || ls.Slot() >= semPermits {
					t.Errorf("lease kind %s, name %q, slot %d; want a permit of %q in [0,%d)", ls.Kind(), ls.Name(), ls.Slot(), name, semPermits)
				}
				time.Sleep(20 * time.Millisecond)
				g.leave()
				release(t, ls)
			}
		})
	}
	wg.Wait()
	if most := g.most.Load(); most > semPermits {
		t.Fatalf("%d holders inside at once, the semaphore has %d permits", most, semPermits)
	} else if most < 2 {
		t.Errorf("at most %d holder inside at once: the semaphore acted as a mutex", most)
	}
	t.Logf("at most %d of %d permits held at once", g.most.Load(), semPermits)
	checkFencesBySlot(t, grants)
}

// checkFencesBySlot checks that each slot's fences increase in grant order
// (a slot has one holder at a time, so grant order is time order).
func checkFencesBySlot(t *testing.T, grants []grant) {
	t.Helper()
	slices.SortFunc(grants, func(a, b grant) int { return a.at.Compare(b.at) })
	last := map[int]uint64{}
	for _, g := range grants {
		if f, ok := last[g.slot]; ok && g.fence <= f {
			t.Errorf("permit %d: fence %d after fence %d, want strictly increasing", g.slot, g.fence, f)
		}
		last[g.slot] = g.fence
	}
}

// testSemaphoreKinds: a name held as another kind, or as a semaphore with
// another permit count, is refused with a *KindError naming both; bad
// permit counts are invalid arguments.
func (s *suite) testSemaphoreKinds(t *testing.T) {
	s.needLister(t)
	l := s.locker(t)
	ctx := s.ctx(t)
	for _, n := range []int{0, -1, dlock.MaxPermits + 1} {
		if _, err := l.Semaphore(s.name(t, "bad"), n); !errors.Is(err, dlock.ErrInvalidArgument) {
			t.Errorf("Semaphore with %d permits: %v, want ErrInvalidArgument", n, err)
		}
	}
	mutex := s.name(t, "mutex")
	defer deferRelease(t, s.acquire(t, l, mutex))()
	lag := 3 * l.Capabilities().ListLag // a kind is checked in a listing
	time.Sleep(lag)
	sem, err := l.Semaphore(mutex, 2, s.opts()...)
	if err != nil {
		t.Fatal(err)
	}
	expectKindError(t, "semaphore over a held mutex", try(sem.TryAcquire(ctx)), dlock.KindMutex)
	name := s.name(t, "sem")
	two, _ := l.Semaphore(name, 2, s.opts()...)
	p := s.permit(t, two)
	defer deferRelease(t, p)()
	time.Sleep(lag)
	three, _ := l.Semaphore(name, 3, s.opts()...)
	expectKindError(t, "3-permit semaphore over a 2-permit one", try(three.TryAcquire(ctx)), dlock.KindPermit)
	if rw, err := l.RWMutex(name, s.opts()...); err == nil {
		expectKindError(t, "read lock over a semaphore", try(rw.RLock(ctx, dlock.WithWait(0))), dlock.KindPermit)
	} else if !errors.Is(err, dlock.ErrUnsupported) {
		t.Fatal(err)
	}
	el, err := l.Election(name, s.opts()...)
	if err != nil {
		t.Fatal(err)
	}
	expectKindError(t, "election over a semaphore", try(el.Campaign(ctx, "x", dlock.WithWait(0))), dlock.KindPermit)
}

// try releases a lease that should not have been granted and returns err.
func try(ls *dlock.Lease, err error) error {
	if ls != nil {
		_ = ls.Release(context.Background())
		return errors.New("granted")
	}
	return err
}

func deferRelease(t testing.TB, ls *dlock.Lease) func() { return func() { release(t, ls) } }

func expectKindError(t *testing.T, what string, err error, held dlock.Kind) {
	t.Helper()
	var ke *dlock.KindError
	if !errors.As(err, &ke) || !errors.Is(err, dlock.ErrKindMismatch) {
		t.Errorf("%s: %v, want a *KindError", what, err)
		return
	}
	if ke.Held != held || !strings.Contains(err.Error(), ke.Name) {
		t.Errorf("%s: %v (held as %s), want it to name the name and %s", what, err, ke.Held, held)
	}
}

// permit takes a permit of sem or fails t.
func (s *suite) permit(t testing.TB, sem *dlock.Semaphore, extra ...dlock.Option) *dlock.Lease {
	t.Helper()
	ls, err := sem.Acquire(s.ctx(t), extra...)
	if err != nil {
		t.Fatalf("%s: Acquire: %v", sem, err)
	}
	return ls
}

// testSemaphoreWake: with every permit held, a waiter whose polling
// backoff is long is woken by a release on backends that notify.
func (s *suite) testSemaphoreWake(t *testing.T) {
	s.needLister(t)
	name := s.name(t)
	hold, _ := s.locker(t).Semaphore(name, 2, s.opts(dlock.WithTTL(s.longTTL()))...)
	a, b := s.permit(t, hold), s.permit(t, hold)
	defer deferRelease(t, b)()
	wl := s.locker(t)
	waiter, _ := wl.Semaphore(name, 2, s.opts(dlock.WithWait(s.longTTL()), dlock.WithBackoff(wakeBackoff, 4*wakeBackoff))...)
	got := make(chan time.Time, 1)
	var ls *dlock.Lease
	var err error
	ctx := s.ctx(t)
	go func() {
		ls, err = waiter.Acquire(ctx)
		got <- time.Now()
	}()
	time.Sleep(s.ttl / 2)
	if hs, herr := hold.Holders(ctx); herr != nil || len(hs) < 2 {
		t.Errorf("Holders = %v, %v; want both permits (and maybe the queue)", hs, herr)
	}
	released := time.Now()
	release(t, a)
	at := <-got
	if err != nil {
		t.Fatalf("waiter's Acquire: %v", err)
	}
	defer release(t, ls)
	latency := at.Sub(released)
	t.Logf("waiter got a permit %s after the release", latency)
	if s.notifies() && latency > wakeBackoff/5 {
		t.Errorf("waiter got a permit %s after the release; the driver notifies or queues, so the release should wake it (polling backoff %s+)", latency, wakeBackoff)
	}
}

// testSemaphoreLoss: a force-released permit is lost (Done closes), its
// slot is free, and its next fence is higher.
func (s *suite) testSemaphoreLoss(t *testing.T) {
	s.needLister(t)
	l := s.locker(t)
	ctx := s.ctx(t)
	sem, _ := l.Semaphore(s.name(t), 2, s.opts(dlock.WithTTL(s.stallTTL()))...)
	if !s.provides(ForceReleaser) {
		s.skipLacking(t, ForceReleaser)
	}
	victim := s.permit(t, sem)
	time.Sleep(100 * time.Millisecond) // eviction watchers subscribe in the background
	evicted, ok, fence, err := sem.ForceRelease(ctx, victim.Slot())
	if err != nil || !ok || evicted.Fence != victim.Fence() || evicted.Slot != victim.Slot() || fence <= victim.Fence() {
		t.Fatalf("ForceRelease(%d) = %+v, %v, %d, %v; want the victim evicted and a higher fence", victim.Slot(), evicted, ok, fence, err)
	}
	if bound := s.stallTTL()/3 + s.slack(); !done(t, victim, bound) {
		t.Fatalf("force-released permit's Done not closed within %s", bound)
	}
	if !errors.Is(victim.Err(), dlock.ErrLost) {
		t.Errorf("force-released permit's Err = %v, want ErrLost", victim.Err())
	}
	if _, _, _, err := sem.ForceRelease(ctx, 2); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Errorf("ForceRelease of permit 2 of 2: %v, want ErrInvalidArgument", err)
	}
}

// testSemaphoreCrash SIGKILLs a child holding the only permit: the permit
// comes back within its TTL plus a margin.
func (s *suite) testSemaphoreCrash(t *testing.T) {
	s.needLister(t)
	s.needProcesses(t)
	name := s.name(t)
	c := s.startChild(t, childSpec{Role: rolePermit, Names: []string{name}, N: 1})
	if line := c.line(t, time.Minute); !strings.HasPrefix(line, "held ") {
		t.Fatalf("child said %q, want \"held FENCE\"; stderr:\n%s", line, c.stderr.String())
	}
	sem, _ := s.locker(t).Semaphore(name, 1, s.opts()...)
	if _, err := sem.TryAcquire(s.ctx(t)); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryAcquire while the child holds the permit: %v, want ErrNotAcquired", err)
	}
	c.kill()
	killed := time.Now()
	bound := s.ttl + s.slack()
	ls, err := sem.Acquire(s.ctx(t), dlock.WithWait(bound))
	if err != nil {
		t.Fatalf("permit of a SIGKILLed holder not back %s later (TTL %s): %v", time.Since(killed), s.ttl, err)
	}
	t.Logf("permit back %s after SIGKILL (TTL %s)", time.Since(killed), s.ttl)
	release(t, ls)
}

// needLister skips t on a driver that cannot list holders, after checking
// that a primitive there fails with ErrUnsupported rather than hanging or
// acting without its listing.
func (s *suite) needLister(t *testing.T) {
	t.Helper()
	if s.provides(Lister) {
		return
	}
	l := s.locker(t)
	sem, err := l.Semaphore(s.name(t, "unlisted"), 2, s.opts()...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sem.TryAcquire(s.ctx(t)); !errors.Is(err, dlock.ErrUnsupported) {
		t.Fatalf("semaphore on a driver without a Lister: %v, want ErrUnsupported", err)
	}
	t.Skipf("semaphores, read-write locks and elections need driver.Lister, which the driver lacks: %s", s.h.Lacks[Lister])
}

// testSemaphoreFIFO: on a backend that queues waiters (driver.Queuer),
// waiters for a semaphore's only permit get it in the order they came.
func (s *suite) testSemaphoreFIFO(t *testing.T) {
	s.needLister(t)
	if !s.provides(Queuer) {
		s.skipLacking(t, Queuer)
	}
	name := s.name(t)
	ctx := s.ctx(t)
	sem := func() *dlock.Semaphore {
		m, err := s.locker(t).Semaphore(name, 1, s.opts(dlock.WithWait(s.longTTL()))...)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	holder := s.permit(t, sem())
	order := make(chan int, 3)
	var wg sync.WaitGroup
	for i := range 3 {
		m := sem()
		wg.Go(func() {
			ls, err := m.Acquire(ctx)
			if err != nil {
				t.Errorf("waiter %d: %v", i, err)
				order <- -1
				return
			}
			order <- i
			time.Sleep(50 * time.Millisecond)
			release(t, ls)
		})
		time.Sleep(s.ttl / 4) // let waiter i queue before the next
	}
	release(t, holder)
	wg.Wait()
	close(order)
	var got []int
	for i := range order {
		got = append(got, i)
	}
	if !slices.Equal(got, []int{0, 1, 2}) {
		t.Errorf("waiters got the permit in order %v, want [0 1 2] (first come, first served)", got)
	}
}
