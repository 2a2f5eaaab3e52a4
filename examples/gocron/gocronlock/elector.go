package gocronlock

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/dlockdev/dlock"
	"github.com/go-co-op/gocron/v2"
)

// ErrNotLeader is matched by IsLeader's error when this Elector does not
// hold the election's term: gocron then skips the run.
var ErrNotLeader = errors.New("gocronlock: not the leader")

// Elector is a gocron.Elector over a dlock election: it campaigns in the
// background from NewElector on, and IsLeader is nil while it holds the
// term. A term ends when its lease is lost or released (Close, or
// dlock.Locker.Close), and another Elector's campaign wins the next one;
// one whose term was lost campaigns again.
//
// A term is a lease: a leader paused past its TTL still runs the job it
// started while a new leader runs the next one. Guard what the jobs write
// with the term's fence (package fence) where that matters.
type Elector struct {
	election *dlock.Election
	value    string
	cancel   context.CancelFunc
	done     chan struct{}

	mu      sync.Mutex
	term    *dlock.Lease
	stopped error // why campaigning ended for good, if it did
	resign  error // the last term's release, for Close
}

var _ gocron.Elector = (*Elector)(nil)

// NewElector starts campaigning in the election name of dl, publishing
// value as the leader's (its address, say; "" publishes dl's owner). opts
// are the election's options (dlock.WithTTL bounds how long a crashed
// leader keeps the term). A bad name, value or option is an error matching
// dlock.ErrInvalidArgument. Close stops the campaign and resigns; closing
// dl stops it too.
func NewElector(dl *dlock.Locker, name, value string, opts ...dlock.Option) (*Elector, error) {
	if dl == nil {
		return nil, fmt.Errorf("gocronlock: NewElector needs a dlock.Locker: %w", dlock.ErrInvalidArgument)
	}
	election, err := dl.Election(name, opts...)
	if err != nil {
		return nil, fmt.Errorf("gocronlock: %w", err)
	}
	if value != "" { // Campaign publishes it as the owner: check it now
		if _, err := dl.Election(name, dlock.WithOwner(value)); err != nil {
			return nil, fmt.Errorf("gocronlock: value: %w", err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	e := &Elector{election: election, value: value, cancel: cancel, done: make(chan struct{})}
	go e.campaign(ctx)
	return e, nil
}

// IsLeader returns nil while this Elector holds a live term, and else an
// error matching ErrNotLeader (joined with why campaigning ended, if it
// did: a closed dlock.Locker, say).
func (e *Elector) IsLeader(context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.term != nil && e.term.Err() == nil:
		return nil
	case e.stopped != nil:
		return fmt.Errorf("%w of %s (campaign ended: %w)", ErrNotLeader, e.election, e.stopped)
	default:
		return fmt.Errorf("%w of %s", ErrNotLeader, e.election)
	}
}

// Fence returns the term's number (its lease's fence) while this Elector
// holds a live term, and 0 otherwise: pass it with the jobs' writes to a
// fenced resource, which then refuses a deposed leader's.
func (e *Elector) Fence() uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.term == nil || e.term.Err() != nil {
		return 0
	}
	return e.term.Fence()
}

// Close stops campaigning, resigns the term if this Elector holds one,
// and waits for the campaign to end. It returns the failure to release the
// term, if any, and is idempotent.
func (e *Elector) Close() error {
	e.cancel()
	<-e.done
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.resign
}

// campaign wins terms until ctx is done or a campaign fails for good.
// Campaign waits without bound and retries the backend's failures itself,
// so any error it returns before ctx is done is one retrying cannot cure
// (a closed Locker, a name in use by another kind of primitive).
func (e *Elector) campaign(ctx context.Context) {
	defer close(e.done)
	for ctx.Err() == nil {
		term, err := e.election.Campaign(ctx, e.value)
		if err != nil {
			if ctx.Err() == nil {
				e.set(nil, err)
			}
			return
		}
		e.set(term, nil)
		select {
		case <-term.Done(): // lost, or released by Locker.Close
		case <-ctx.Done():
		}
		e.set(nil, nil)
		err = term.Release(context.Background())
		if errors.Is(err, dlock.ErrLost) || errors.Is(err, dlock.ErrReleased) {
			err = nil
		}
		e.mu.Lock()
		e.resign = err
		e.mu.Unlock()
	}
}

func (e *Elector) set(term *dlock.Lease, stopped error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.term, e.stopped = term, stopped
}
