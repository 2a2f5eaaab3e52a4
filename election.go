package dlock

import (
	"context"
	"errors"
	"fmt"
)

// Election elects one leader among processes and machines, for terms.
//
// A term is a lease (Kind KindLeader) whose Fence is the term number: it
// strictly increases from leader to leader, so the fence guards of package
// fence reject a deposed leader's writes unchanged. The leader publishes a
// value (its address, say), shown to others as the holder's Owner.
//
// A new term begins only after the previous term's lease is gone on the
// backend: released, expired after its TTL, or force-released. That is all
// a lease can promise. A leader that is paused (GC, SIGSTOP, a VM
// migration) past its TTL still believes it leads when it wakes, until its
// watchdog tells it — Done closes at once then, but its writes in flight
// may land after the new leader's. Only the resource can refuse those:
// pass Fence with every write and guard it (package fence).
type Election struct {
	l    *Locker
	name string
	opts []Option
}

// Election returns the election name; opts become its defaults. A bad name
// or option is an ErrInvalidArgument naming the value. Making one touches
// no backend.
func (l *Locker) Election(name string, opts ...Option) (*Election, error) {
	if _, err := l.primitiveSettings("election", name, opts); err != nil {
		return nil, err
	}
	return &Election{l: l, name: name, opts: opts}, nil
}

// Name returns the election's name.
func (e *Election) Name() string { return e.name }

// String describes the election, e.g. `election "scheduler"`.
func (e *Election) String() string { return fmt.Sprintf("election %q", e.name) }

// Campaign waits to become leader and returns the term's lease: until
// elected or ctx is done (WithWait sets a bound; the default is none).
// value is what the leader publishes (at most 256 bytes of printable
// text; "" publishes the owner, host/pid by default). Resign by releasing
// the lease; a lost lease ends the term (Done, Err, Context). The errors
// are Acquire's, and ErrKindMismatch when the name is in use as another
// kind of primitive.
func (e *Election) Campaign(ctx context.Context, value string, opts ...Option) (*Lease, error) {
	call := append([]Option{WithWait(Forever)}, opts...)
	if value != "" {
		call = append(call, WithOwner(value))
	}
	s, err := e.l.callSettings(e.name, e.opts, call)
	if err != nil {
		return nil, err
	}
	ctx, t := e.l.traceAcquire(ctx, e.name, KindLeader, s)
	if _, err := e.l.holdersOf(ctx, e.name, KindLeader, 0); err != nil {
		return t.done(nil, err)
	}
	return t.done(e.l.acquire(ctx, key(e.name, KindLeader), s))
}

// Leader returns the current leader: Owner is its published value, Fence
// its term, TTL the time left on its lease. ok is false when there is none.
func (e *Election) Leader(ctx context.Context) (leader Holder, ok bool, err error) {
	lister, err := e.l.lister()
	if err != nil {
		return Holder{}, false, err
	}
	dh, ok, err := lister.Inspect(ctx, key(e.name, KindLeader))
	if err != nil {
		return Holder{}, false, backend("inspect", e.name, err)
	}
	if !ok {
		return Holder{Name: e.name, Kind: KindLeader, Slot: -1, TTL: -1}, false, nil
	}
	h := holderFrom(dh)
	h.Name, h.Kind, h.Slot = e.name, KindLeader, -1
	return h, true, nil
}

// Observe sends the leader each time it changes (a new term, or a new
// value), starting with the current one; a Holder with Fence 0 means there
// is no leader. The channel is closed when ctx is done or the Locker is
// closed (Close waits for it); until then the caller must keep receiving
// or cancel ctx.
//
// A leader's end is seen at once where the backend notifies releases
// (driver.Notifier), and otherwise within DefaultBackoffMax (or the
// Locker's WithBackoff maximum); a new leader, which no backend announces,
// is looked for with backoff from the moment the old one is gone.
// Failures to reach the backend are retried with backoff and send nothing;
// on a backend that cannot inspect holders the channel is closed at once.
func (e *Election) Observe(ctx context.Context) <-chan Holder {
	ch := make(chan Holder)
	s := e.l.defaults
	if cs, err := e.l.callSettings(e.name, e.opts, nil); err == nil {
		s = cs
	}
	e.l.background(func(stop <-chan struct{}) { // Locker.Close ends it and waits
		octx, cancel := context.WithCancel(ctx)
		defer cancel()
		go func() {
			select {
			case <-stop:
				cancel()
			case <-octx.Done():
			}
		}()
		e.observe(octx, ch, s)
	})
	return ch
}

func (e *Election) observe(ctx context.Context, ch chan<- Holder, s settings) {
	defer close(ch)
	w := e.l.newWaiter(e.name, s)
	defer w.close()
	var last Holder
	sent := false
	for ctx.Err() == nil && e.l.usable() == nil {
		h, ok, err := e.Leader(ctx)
		if errors.Is(err, ErrUnsupported) {
			return // a backend that cannot list holders: nothing to observe
		}
		var held []Holder
		if err == nil {
			if !sent || h.Fence != last.Fence || h.Owner != last.Owner {
				select {
				case ch <- h:
				case <-ctx.Done():
					return
				}
				last, sent = h, true
				w.again() // a change: look again soon
			}
			if ok {
				h.Kind = KindLeader
				held = []Holder{h}
			}
		}
		if w.pause(ctx, held) != nil {
			return
		}
	}
}

// ForceRelease ends the current term whoever holds it, as
// Locker.ForceRelease does for a mutex: the term's fence is raised so the
// deposed leader's fenced writes are refused, and the next campaigner is
// elected. It returns the evicted leader (ok false when there was none).
func (e *Election) ForceRelease(ctx context.Context) (evicted Holder, ok bool, newFence uint64, err error) {
	return e.l.forceRelease(ctx, key(e.name, KindLeader))
}
