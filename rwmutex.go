package dlock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
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
	w, wctx := m.l.waitFor(ctx, m.name, s)
	defer w.close()
	gate, err := m.l.acquire(ctx, key(m.name, KindWrite), w.remaining())
	if err != nil {
		return nil, err
	}
	w.mayTake = true
	var readers []Holder // the readers still in, as last seen
	ls, err := w.run(ctx, wctx, func(wctx context.Context, got *Lease) sight {
		if got != nil { // queued on a reader's key and got it: it has left
			_ = got.Release(context.WithoutCancel(ctx))
		}
		hs, err := m.l.holdersOf(wctx, m.name, KindWrite, 0)
		if err == nil && gate.Err() != nil {
			err = gate.Err() // lost while readers left
		}
		switch {
		case err != nil && wctx.Err() != nil && len(readers) > 0:
			return sight{err: w.heldBy(ctx, readers[0])}
		case err != nil:
			return sight{err: err}
		}
		if readers = only(hs, KindRead); len(readers) == 0 {
			return sight{lease: gate}
		}
		return blocked(readers[0], readers)
	})
	if err != nil {
		_ = gate.Release(context.WithoutCancel(ctx))
	}
	return ls, err
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
	w, wctx := m.l.waitFor(ctx, m.name, s)
	defer w.close()
	w.mayTake = true
	for {
		gs := w.remaining()
		gs.owner = truncateOwner(s.owner, enteringSuffix)
		gate, err := m.l.acquire(ctx, key(m.name, KindWrite), gs)
		if err != nil {
			return nil, err
		}
		ls, err := m.enter(ctx, wctx, &w, gate, s)
		_ = gate.Release(context.WithoutCancel(ctx))
		if !errors.Is(err, errGateLost) {
			return ls, err
		}
		if wctx.Err() != nil {
			return nil, w.heldBy(ctx, Holder{Name: m.name, Kind: KindWrite, Slot: -1, TTL: -1})
		}
	}
}

// errGateLost: the write key a reader held to enter was lost before its
// read grant was confirmed; it leaves and enters again.
var errGateLost = errors.New("dlock: write key lost while entering to read")

// enter takes a free read key while the reader holds the write key,
// waiting through w while MaxReaders readers are in.
func (m *RWMutex) enter(ctx, wctx context.Context, w *waiter, gate *Lease, s settings) (*Lease, error) {
	defer w.reset() // entering again is a new wait
	s.wait = 0      // each read key is one attempt
	return w.run(ctx, wctx, func(wctx context.Context, got *Lease) sight {
		sg := sight{lease: got} // a read key the backend's queue granted
		if got == nil {
			sg = m.takeSlot(wctx, s)
		}
		if sg.lease == nil {
			return sg
		}
		return m.admit(ctx, gate, sg.lease)
	})
}

// takeSlot takes a free read key, or names the readers in the way when
// MaxReaders are in.
func (m *RWMutex) takeSlot(ctx context.Context, s settings) sight {
	for {
		hs, err := m.l.holdersOf(ctx, m.name, KindRead, 0)
		if err != nil {
			return sight{err: err}
		}
		readers := only(hs, KindRead)
		slot, ok := freeSlot(readers)
		if !ok {
			return blocked(readers[0], readers)
		}
		ls, err := m.l.acquire(ctx, key(m.name, KindRead, slot), s)
		if !errors.Is(err, ErrNotAcquired) {
			return sight{lease: ls, err: err}
		}
		// An expired reader's key, gone by now or soon: look again.
	}
}

// admit keeps a read grant if the write key is still the reader's now
// that the read key is confirmed: then a writer that takes the write key
// later finds this reader in its listing. Local expiry is earlier than
// the backend's, so this errs on the safe side.
func (m *RWMutex) admit(ctx context.Context, gate, ls *Lease) sight {
	if gate.Err() != nil || !m.l.now().Before(gate.Expires()) {
		_ = ls.Release(context.WithoutCancel(ctx))
		return sight{err: errGateLost}
	}
	ls.shown.Store(gate.Fence())
	return sight{lease: ls}
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
