package dlock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
)

// MaxPermits bounds a Semaphore's permit count.
const MaxPermits = 1024

// Semaphore is a counting semaphore: at most Permits holders of one name
// at a time, across processes and machines. Each permit is a lease like a
// mutex's: its own fence (strictly increasing per permit slot), kept alive
// by the watchdog, Done closed the moment it is lost, and back for others
// within its TTL after its holder crashes (a permit never leaks).
//
// Every process must use the same permit count for a name: an acquire that
// finds permits held under another count fails with a *KindError, as does
// one that finds the name held as a mutex, a read-write lock or an election.
//
// Waiters queue: the first holds the semaphore's queue key (KindQueue)
// while it waits for a permit, woken by the release notifications of the
// permits' holders where the backend sends them, and later waiters wait for
// the queue key in the backend's own order (FIFO on etcd, ZooKeeper and
// Postgres advisory mode; by notification elsewhere). A Semaphore is safe
// for concurrent use.
type Semaphore struct {
	l       *Locker
	name    string
	permits int
	opts    []Option
}

// Semaphore returns the semaphore name with the given number of permits.
// opts become its defaults (TTL, wait, owner, ...); permits below 1 or above
// MaxPermits, and a bad name or option, are an ErrInvalidArgument naming
// the value. Making one touches no backend.
func (l *Locker) Semaphore(name string, permits int, opts ...Option) (*Semaphore, error) {
	if _, err := l.primitiveSettings("semaphore", name, opts); err != nil {
		return nil, err
	}
	if permits < 1 || permits > MaxPermits {
		return nil, invalid("semaphore %q: %d permits, want 1 to %d", name, permits, MaxPermits)
	}
	return &Semaphore{l: l, name: name, permits: permits, opts: opts}, nil
}

// Name returns the semaphore's name.
func (m *Semaphore) Name() string { return m.name }

// Permits returns the number of permits.
func (m *Semaphore) Permits() int { return m.permits }

// Acquire takes one permit, waiting (WithWait, default DefaultWait) while
// all are held. The lease's Kind is KindPermit and Slot its permit's
// index; Release gives the permit back. The errors are Acquire's:
// ErrNotAcquired with a *HeldError naming one permit's holder, ErrBackend
// for an outage, and ErrKindMismatch as above.
func (m *Semaphore) Acquire(ctx context.Context, opts ...Option) (*Lease, error) {
	s, err := m.l.callSettings(m.name, m.opts, opts)
	if err != nil {
		return nil, err
	}
	ctx, t := m.l.traceAcquire(ctx, m.name, KindPermit, s)
	return t.done(m.acquire(ctx, s))
}

func (m *Semaphore) acquire(ctx context.Context, s settings) (*Lease, error) {
	w, wctx := m.l.waitFor(ctx, m.name, s)
	defer w.close()
	hs, err := m.l.holdersOf(wctx, m.name, KindPermit, m.permits)
	if err != nil {
		return nil, err
	}
	if !holds(hs, KindQueue) { // nobody queues: take a free permit at once
		if ls, _, err := m.tryFree(wctx, hs, s); ls != nil || err != nil {
			return ls, err
		}
	}
	if s.wait == 0 {
		return nil, w.heldBy(ctx, first(hs, KindPermit))
	}
	// Queue behind earlier waiters, then wait for a permit at the head.
	q, err := m.l.acquire(ctx, key(m.name, KindQueue), w.remaining())
	if err != nil {
		return nil, err
	}
	defer q.Release(context.WithoutCancel(ctx))
	w.mayTake = true
	return w.run(ctx, wctx, func(wctx context.Context, got *Lease) sight {
		if got != nil {
			return sight{lease: got} // queued on a held permit and granted it
		}
		return m.look(wctx, s)
	})
}

// look takes a free permit if the listing shows one, or names the
// permits in the way.
func (m *Semaphore) look(ctx context.Context, s settings) sight {
	hs, err := m.l.holdersOf(ctx, m.name, KindPermit, m.permits)
	if err != nil {
		return sight{err: err}
	}
	ls, unlisted, err := m.tryFree(ctx, hs, s)
	if ls != nil || err != nil {
		return sight{lease: ls, err: err}
	}
	return blocked(first(hs, KindPermit), append(only(hs, KindPermit), unlisted...))
}

// TryAcquire makes one attempt: a permit if one is free now.
func (m *Semaphore) TryAcquire(ctx context.Context, opts ...Option) (*Lease, error) {
	return m.Acquire(ctx, append(opts, WithWait(0))...)
}

// tryFree tries the permits that hs shows free, from a random one on so
// that concurrent takers spread out. With no lease and no error, none
// could be had; unlisted then names the permits it found held that hs did
// not show (taken since, or not yet listed: see driver.Capabilities.ListLag).
func (m *Semaphore) tryFree(ctx context.Context, hs []Holder, s settings) (ls *Lease, unlisted []Holder, err error) {
	taken := make([]bool, m.permits)
	for _, h := range hs {
		if h.Kind == KindPermit && h.Slot >= 0 && h.Slot < m.permits {
			taken[h.Slot] = true
		}
	}
	s.wait = 0
	off := rand.N(m.permits)
	for i := range m.permits {
		slot := (off + i) % m.permits
		if taken[slot] {
			continue
		}
		ls, err := m.l.acquire(ctx, key(m.name, KindPermit, m.permits, slot), s)
		var held *HeldError
		switch {
		case err == nil:
			return ls, nil, nil
		case errors.As(err, &held): // held after all: try the next
			unlisted = append(unlisted, held.Holder)
		default:
			return nil, nil, err
		}
	}
	return nil, unlisted, nil
}

// Holders lists the permits held now (Kind KindPermit, Slot the permit)
// and the waiter at the head of the queue (Kind KindQueue), if any.
func (m *Semaphore) Holders(ctx context.Context) ([]Holder, error) {
	return m.l.holdersOf(ctx, m.name, KindPermit, m.permits)
}

// ForceRelease frees one permit regardless of its holder and bumps that
// permit's fence, as Locker.ForceRelease does for a mutex.
func (m *Semaphore) ForceRelease(ctx context.Context, slot int) (evicted Holder, ok bool, newFence uint64, err error) {
	if slot < 0 || slot >= m.permits {
		return Holder{}, false, 0, invalid("semaphore %q: permit %d, want 0 to %d", m.name, slot, m.permits-1)
	}
	return m.l.forceRelease(ctx, key(m.name, KindPermit, m.permits, slot))
}

// String describes the semaphore, e.g. `semaphore "jobs" (4 permits)`.
func (m *Semaphore) String() string {
	return fmt.Sprintf("semaphore %q (%d permits)", m.name, m.permits)
}
