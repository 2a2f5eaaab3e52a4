package dlocktest

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
)

// testRWMutexPreference: two readers hold at once; a writer waits for
// them; a reader arriving while the writer waits waits behind it (writer
// preference); the write's fence exceeds both reads', and a later read's
// exceeds the write's.
func (s *suite) testRWMutexPreference(t *testing.T) {
	s.needLister(t)
	name := s.name(t)
	ctx := s.ctx(t)
	s.needRWMutex(t)
	rw := s.rwMutexes(t, name)
	r1, r2 := s.readersShare(t, ctx, rw)
	s.writerWaitsForReaders(t, ctx, rw)
	w := s.writerGoesFirst(t, ctx, rw, r1, r2)
	release(t, w)
	r3, err := rw().RLock(ctx)
	if err != nil {
		t.Fatalf("RLock after the writer: %v", err)
	}
	if r3.Fence() <= w.Fence() {
		t.Errorf("read after the write: fence %d, want above the write's %d", r3.Fence(), w.Fence())
	}
	release(t, r3)
}

// rwMutexes returns a maker of name's RWMutex, each on a Locker of its
// own: a contender of its own.
func (s *suite) rwMutexes(t *testing.T, name string) func() *dlock.RWMutex {
	return func() *dlock.RWMutex {
		m, err := s.locker(t).RWMutex(name, s.opts()...)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
}

// readersShare takes two reads at once: both read grants, the second's
// fence above the first's.
func (s *suite) readersShare(t *testing.T, ctx context.Context, rw func() *dlock.RWMutex) (r1, r2 *dlock.Lease) {
	r1, err := rw().RLock(ctx)
	if err != nil {
		t.Fatalf("first RLock: %v", err)
	}
	r2, err = rw().RLock(ctx, dlock.WithWait(s.slack()))
	if err != nil {
		t.Fatalf("second RLock while a reader holds: %v", err)
	}
	if r1.Kind() != dlock.KindRead || r2.Fence() <= r1.Fence() {
		t.Errorf("reads: kind %s, fences %d then %d; want read grants with increasing fences", r1.Kind(), r1.Fence(), r2.Fence())
	}
	return r1, r2
}

// writerWaitsForReaders: while readers hold, a write is not granted,
// neither within a bounded wait nor in one attempt.
func (s *suite) writerWaitsForReaders(t *testing.T, ctx context.Context, rw func() *dlock.RWMutex) {
	if _, err := rw().Lock(ctx, dlock.WithWait(s.ttl/2)); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("Lock while readers hold: %v, want ErrNotAcquired", err)
	}
	if _, err := rw().Lock(ctx, dlock.WithWait(0)); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("one attempt at Lock while readers hold: %v, want ErrNotAcquired", err)
	}
}

// writerGoesFirst starts a writer waiting for the readers r1 and r2: a
// reader arriving meanwhile is not let in ahead of it, and once r1 and r2
// leave the writer gets a write grant with a fence above theirs, which it
// returns.
func (s *suite) writerGoesFirst(t *testing.T, ctx context.Context, rw func() *dlock.RWMutex, r1, r2 *dlock.Lease) *dlock.Lease {
	var w *dlock.Lease
	var werr error
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		w, werr = rw().Lock(ctx, dlock.WithWait(s.longTTL()))
	}()
	time.Sleep(s.ttl / 2) // the writer has the write key and waits for readers
	if _, err := rw().RLock(ctx, dlock.WithWait(s.ttl/2)); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Errorf("RLock while a writer waits: %v, want ErrNotAcquired (writers are preferred)", err)
	}
	release(t, r1)
	release(t, r2)
	<-wrote
	if werr != nil {
		t.Fatalf("writer after the readers left: %v", werr)
	}
	if w.Kind() != dlock.KindWrite || w.Fence() <= r2.Fence() {
		t.Errorf("write: kind %s, fence %d; want a write grant with a fence above the reads' %d", w.Kind(), w.Fence(), r2.Fence())
	}
	return w
}

// testRWMutexExclusion: 8 goroutines on 2 Lockers mix reads and writes;
// a writer is never inside with anyone, readers do overlap, and fences
// never go backwards for a write.
func (s *suite) testRWMutexExclusion(t *testing.T) {
	s.needLister(t)
	s.needRWMutex(t)
	name := s.name(t)
	ctx := s.ctx(t)
	var mix rwMix
	var wg sync.WaitGroup
	for i := range 8 {
		m, err := s.locker(t).RWMutex(name, s.contendOpts()...)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { mix.turns(t, ctx, m, i%4 == 0) })
	}
	wg.Wait()
	if n := mix.overlaps.Load(); n > 0 {
		t.Fatalf("a writer was inside with another holder %d times", n)
	}
	t.Logf("at most %d readers at once", mix.readers.most.Load())
	if mix.readers.most.Load() < 2 {
		t.Errorf("readers never overlapped: the lock acted as a mutex")
	}
}

// rwMix is who is inside testRWMutexExclusion's lock: readers and
// writers, how often a writer was inside with another holder, and the
// last write's fence.
type rwMix struct {
	readers, writers gauge
	overlaps         atomic.Int64
	mu               sync.Mutex
	lastWrite        uint64
}

// turns takes m 6 times: a write half of the time when writes is set,
// a read otherwise. It stops at the first error.
func (x *rwMix) turns(t *testing.T, ctx context.Context, m *dlock.RWMutex, writes bool) {
	for range 6 {
		take := x.read
		if writes && rand.N(2) == 0 {
			take = x.write
		}
		if !take(t, ctx, m) {
			return
		}
	}
}

// write holds m's write lock for 5 ms, counting anyone inside with it,
// and checks its fence is above the last write's.
func (x *rwMix) write(t *testing.T, ctx context.Context, m *dlock.RWMutex) bool {
	ls, err := m.Lock(ctx)
	if err != nil {
		t.Errorf("Lock: %v", err)
		return false
	}
	x.writers.enter()
	if x.writers.inside.Load() > 1 || x.readers.inside.Load() > 0 {
		x.overlaps.Add(1)
	}
	x.mu.Lock()
	if ls.Fence() <= x.lastWrite {
		t.Errorf("write fence %d after write fence %d", ls.Fence(), x.lastWrite)
	}
	x.lastWrite = ls.Fence()
	x.mu.Unlock()
	time.Sleep(5 * time.Millisecond)
	x.writers.leave()
	release(t, ls)
	return true
}

// read holds m's read lock for 10 ms, counting a writer inside with it.
func (x *rwMix) read(t *testing.T, ctx context.Context, m *dlock.RWMutex) bool {
	ls, err := m.RLock(ctx)
	if err != nil {
		t.Errorf("RLock: %v", err)
		return false
	}
	x.readers.enter()
	if x.writers.inside.Load() > 0 {
		x.overlaps.Add(1)
	}
	time.Sleep(10 * time.Millisecond)
	x.readers.leave()
	release(t, ls)
	return true
}

// needRWMutex skips t on a backend that does not offer read-write locks,
// after checking that it says so with ErrUnsupported.
func (s *suite) needRWMutex(t *testing.T) {
	t.Helper()
	l := s.locker(t)
	lag := l.Capabilities().ListLag
	_, err := l.RWMutex(s.name(t), s.opts()...)
	switch {
	case lag > 0 && errors.Is(err, dlock.ErrUnsupported):
		t.Skipf("backend lists holders %s late: RWMutex is unsupported (%v)", lag, err)
	case lag > 0:
		t.Fatalf("RWMutex on a backend whose listing lags %s: %v, want ErrUnsupported", lag, err)
	case err != nil:
		t.Fatal(err)
	}
}

// testRWMutexLoss: a force-released writer is lost (Done closes), and the
// next grant's fence is above the one the force-release set.
func (s *suite) testRWMutexLoss(t *testing.T) {
	s.needLister(t)
	s.needRWMutex(t)
	l := s.locker(t)
	if !s.provides(ForceReleaser) {
		s.skipLacking(t, ForceReleaser)
	}
	ctx := s.ctx(t)
	m, err := l.RWMutex(s.name(t), s.opts(dlock.WithTTL(s.stallTTL()))...)
	if err != nil {
		t.Fatal(err)
	}
	w, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // eviction watchers subscribe in the background
	evicted, ok, fence, err := m.ForceRelease(ctx)
	if err != nil || !ok || evicted.Kind != dlock.KindWrite || evicted.Fence != w.Fence() || fence <= w.Fence() {
		t.Fatalf("ForceRelease = %+v, %v, %d, %v; want the writer evicted and a higher fence", evicted, ok, fence, err)
	}
	if bound := s.stallTTL()/3 + s.slack(); !done(t, w, bound) {
		t.Fatalf("force-released writer's Done not closed within %s", bound)
	}
	r, err := m.RLock(ctx)
	if err != nil {
		t.Fatalf("RLock after the writer was evicted: %v", err)
	}
	if r.Fence() <= fence {
		t.Errorf("read after the eviction: fence %d, want above %d", r.Fence(), fence)
	}
	release(t, r)
}
