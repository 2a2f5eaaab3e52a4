package dlock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// MaxReaders is how many read grants of one RWMutex can be held at once; a
// reader past it waits for one to be released like a writer's waiter.
const MaxReaders = 64

// enteringSuffix marks the owner of a reader that holds the write key for
// the moment it takes to enter.
const enteringSuffix = " (entering to read)"

// RWMutex is a read-write lock: many readers or one writer, across
// processes and machines.
//
// It is built from plain locks, so every backend whose listing is
// complete at once offers it (not Postgres advisory mode, whose RWMutex
// is an ErrUnsupported; see driver.Capabilities.ListLag): a writer holds
// the write key (KindWrite) for its whole grant; a reader holds the write
// key only while it enters, takes one of MaxReaders read keys (KindRead),
// and lets the write key go. A writer that has the write key waits for the
// readers already in to leave, woken by their releases, while new readers
// wait behind it: writers are preferred and cannot starve.
//
// Fences come from the write key, which every grant takes in turn: a
// write's fence exceeds every earlier read's and write's, and a read's
// every earlier write's, so a fence guard keyed by the lock's name orders
// them all.
//
// Upgrading is not offered: a reader that asks for the write lock waits
// for itself until its wait bound. Release the read lease first.
type RWMutex struct {
	l    *Locker
	name string
	opts []Option
}

// RWMutex returns the read-write lock name; opts become its defaults. A bad
// name or option is an ErrInvalidArgument naming the value. Making one
// touches no backend.
func (l *Locker) RWMutex(name string, opts ...Option) (*RWMutex, error) {
	if _, err := l.primitiveSettings("read-write lock", name, opts); err != nil {
		return nil, err
	}
	if lag := l.caps.ListLag; lag > 0 {
		return nil, fmt.Errorf("dlock: read-write lock %q: this backend lists a holder only %s after its grant, and a writer must see every reader (on Postgres, use mode=lease): %w", name, lag, ErrUnsupported)
	}
	return &RWMutex{l: l, name: name, opts: opts}, nil
}

// Name returns the lock's name.
func (m *RWMutex) Name() string { return m.name }

// String describes the lock, e.g. `read-write lock "catalog"`.
func (m *RWMutex) String() string { return fmt.Sprintf("read-write lock %q", m.name) }

// Lock takes the write lock, waiting (WithWait, default DefaultWait) for
// the writer before it and then for the readers already in. The lease's
// Kind is KindWrite.
func (m *RWMutex) Lock(ctx context.Context, opts ...Option) (*Lease, error) {
	s, err := m.l.callSettings(m.name, m.opts, opts)
	if err != nil {
		return nil, err
	}
	ctx, t := m.l.traceAcquire(ctx, m.name, KindWrite, s)
	return t.done(m.lock(ctx, s))
}

func (m *RWMutex) lock(ctx context.Context, s settings) (*Lease, error) {
	start := time.Now()
	wctx, cancel := waitContext(ctx, start, s.wait)
	defer cancel()
	gate, err := m.l.acquire(ctx, key(m.name, KindWrite), remaining(s, start))
	if err != nil {
		return nil, err
	}
	w := newReleaseWait(m.l, s, true)
	defer w.stop()
	var readers []Holder // the readers still in, as last seen
	for {
		hs, err := m.l.holdersOf(wctx, m.name, KindWrite, 0)
		if err == nil && gate.Err() != nil {
			err = gate.Err() // lost while readers left
		}
		if err != nil {
			_ = gate.Release(context.WithoutCancel(ctx))
			if wctx.Err() != nil && len(readers) > 0 {
				return nil, heldBy(ctx, m.name, readers[0], time.Since(start))
			}
			return nil, err
		}
		if readers = only(hs, KindRead); len(readers) == 0 {
			return gate, nil
		}
		if err := m.l.usable(); err != nil {
			return nil, err
		}
		if s.wait == 0 { // one attempt: the readers are in
			_ = gate.Release(context.WithoutCancel(ctx))
			return nil, heldBy(ctx, m.name, readers[0], time.Since(start))
		}
		slot, err := w.next(wctx, readers)
		if slot != nil { // queued on a reader's key and got it: it has left
			_ = slot.Release(context.WithoutCancel(ctx))
		}
		if err != nil {
			_ = gate.Release(context.WithoutCancel(ctx))
			return nil, heldBy(ctx, m.name, readers[0], time.Since(start))
		}
	}
}

// RLock takes a read lock, waiting (WithWait, default DefaultWait) while a
// writer holds or waits for the lock, or MaxReaders readers are in. The
// lease's Kind is KindRead and its Fence the write key's fence when it
// entered (see RWMutex).
func (m *RWMutex) RLock(ctx context.Context, opts ...Option) (*Lease, error) {
	s, err := m.l.callSettings(m.name, m.opts, opts)
	if err != nil {
		return nil, err
	}
	ctx, t := m.l.traceAcquire(ctx, m.name, KindRead, s)
	return t.done(m.rlock(ctx, s))
}

func (m *RWMutex) rlock(ctx context.Context, s settings) (*Lease, error) {
	start := time.Now()
	wctx, cancel := waitContext(ctx, start, s.wait)
	defer cancel()
	gs := remaining(s, start)
	gs.owner = truncateOwner(s.owner, enteringSuffix)
	for {
		gate, err := m.l.acquire(ctx, key(m.name, KindWrite), gs)
		if err != nil {
			return nil, err
		}
		ls, err := m.enter(ctx, wctx, gate, s, start)
		_ = gate.Release(context.WithoutCancel(ctx))
		if !errors.Is(err, errGateLost) {
			return ls, err
		}
		if wctx.Err() != nil {
			return nil, heldBy(ctx, m.name, Holder{Name: m.name, Kind: KindWrite, Slot: -1, TTL: -1}, time.Since(start))
		}
		gs = remaining(s, start)
		gs.owner = truncateOwner(s.owner, enteringSuffix)
	}
}

// errGateLost: the write key a reader held to enter was lost before its
// read grant was confirmed; it leaves and enters again.
var errGateLost = errors.New("dlock: write key lost while entering to read")

// enter takes a free read key while the reader holds the write key.
func (m *RWMutex) enter(ctx, wctx context.Context, gate *Lease, s settings, start time.Time) (*Lease, error) {
	w := newReleaseWait(m.l, s, true)
	defer w.stop()
	once := s.wait == 0
	s.wait = 0
	for {
		hs, err := m.l.holdersOf(wctx, m.name, KindRead, 0)
		if err != nil {
			return nil, err
		}
		readers := only(hs, KindRead)
		var ls *Lease
		if slot, ok := freeSlot(readers); ok {
			ls, err = m.l.acquire(wctx, key(m.name, KindRead, slot), s)
			if errors.Is(err, ErrNotAcquired) {
				continue // an expired reader's key, gone by now or soon
			}
		} else if once {
			return nil, heldBy(ctx, m.name, readers[0], time.Since(start))
		} else if ls, err = w.next(wctx, readers); err != nil {
			return nil, heldBy(ctx, m.name, readers[0], time.Since(start))
		}
		if err != nil {
			return nil, err
		}
		if ls == nil {
			continue // a reader may have left: look again
		}
		// The write key must still be ours now that the read key is
		// confirmed: then a writer that takes it later finds this reader
		// in its listing. Local expiry is earlier than the backend's, so
		// this errs on the safe side.
		if gate.Err() != nil || !m.l.now().Before(gate.Expires()) {
			_ = ls.Release(context.WithoutCancel(ctx))
			return nil, errGateLost
		}
		ls.shown.Store(gate.Fence())
		return ls, nil
	}
}

// freeSlot picks a read slot nobody in readers holds, at random.
func freeSlot(readers []Holder) (int, bool) {
	if len(readers) >= MaxReaders {
		return 0, false
	}
	var taken [MaxReaders]bool
	for _, h := range readers {
		if h.Slot >= 0 && h.Slot < MaxReaders {
			taken[h.Slot] = true
		}
	}
	off := rand.N(MaxReaders)
	for i := range MaxReaders {
		if slot := (off + i) % MaxReaders; !taken[slot] {
			return slot, true
		}
	}
	return 0, false
}

// Holders lists the grants held now: the writer (or a reader entering,
// whose owner ends in "(entering to read)") and the readers.
func (m *RWMutex) Holders(ctx context.Context) ([]Holder, error) {
	return m.l.holdersOf(ctx, m.name, KindWrite, 0)
}

// ForceRelease frees the write key whoever holds it (a writer, or a reader
// on its way in), raising its fence as Locker.ForceRelease does for a
// mutex: the evicted writer learns of its loss and its fenced writes are
// refused. Readers already in keep their read grants.
func (m *RWMutex) ForceRelease(ctx context.Context) (evicted Holder, ok bool, newFence uint64, err error) {
	return m.l.forceRelease(ctx, key(m.name, KindWrite))
}

// truncateOwner appends suffix to owner, cutting owner so that the whole
// stays within WithOwner's 256 bytes.
func truncateOwner(owner, suffix string) string {
	if n := 256 - len(suffix); len(owner) > n {
		owner = owner[:n]
		for len(owner) > 0 && !printable(owner) { // do not cut a rune in half
			owner = owner[:len(owner)-1]
		}
	}
	return owner + suffix
}
