package memlock

import (
	"slices"
	"sync"
	"time"

	"github.com/dlockdev/dlock/driver"
)

// evictionSub is one WatchEvictions subscriber. A push appends to its
// queue (never blocking the store, whose mutex the pusher holds) and a
// goroutine of the subscription's own hands the queue on to out in order,
// so a burst of force-releases loses none: each reaches its holder at once
// rather than at the holder's next refresh.
type evictionSub struct {
	mu    sync.Mutex
	queue []driver.Eviction
	wake  chan struct{} // one pending wake-up
	out   chan driver.Eviction
	done  chan struct{} // closed by stop
	ended chan struct{} // closed when the forwarding goroutine has returned
}

func newEvictionSub() *evictionSub {
	s := &evictionSub{wake: make(chan struct{}, 1), out: make(chan driver.Eviction),
		done: make(chan struct{}), ended: make(chan struct{})}
	go s.forward()
	return s
}

// push queues e for the subscriber.
func (s *evictionSub) push(e driver.Eviction) {
	s.mu.Lock()
	s.queue = append(s.queue, e)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// forward hands the queue on to out until stop.
func (s *evictionSub) forward() {
	defer close(s.ended)
	for {
		select {
		case <-s.wake:
		case <-s.done:
			return
		}
		s.mu.Lock()
		batch := s.queue
		s.queue = nil
		s.mu.Unlock()
		for _, e := range batch {
			select {
			case s.out <- e:
			case <-s.done:
				return
			}
		}
	}
}

// stop ends the subscription and waits for its goroutine.
func (s *evictionSub) stop() {
	close(s.done)
	<-s.ended
}

// evictionLookback is how long an eviction is kept for the watchers that
// subscribe after it; maxRecentEvictions bounds how many are.
const (
	evictionLookback   = time.Minute
	maxRecentEvictions = 1024
)

// recentEviction is an eviction and when it was made.
type recentEviction struct {
	e  driver.Eviction
	at time.Time
}

// recentEvictions drops from s.recent what is older than
// evictionLookback, or beyond the newest maxRecentEvictions, and returns
// the rest. s.mu is held.
func (s *Store) recentEvictions(now time.Time) []recentEviction {
	i := 0
	for i < len(s.recent) && now.Sub(s.recent[i].at) > evictionLookback {
		i++
	}
	i = max(i, len(s.recent)-maxRecentEvictions+1)
	if i > 0 {
		s.recent = slices.Delete(s.recent, 0, i)
	}
	return s.recent
}
