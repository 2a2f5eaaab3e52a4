package memlock

import (
	"errors"
	"sync"
	"time"
)

// ErrStopped is returned by every operation on a stopped Store, the way a
// networked driver reports an unreachable server.
var ErrStopped = errors.New("memlock: store stopped")

// Store holds the locks of one in-process "server". Lockers opened on the
// same Store contend for the same names. It is safe for concurrent use.
type Store struct {
	mu       sync.Mutex
	stopped  bool
	holders  map[string]*entry
	fences   map[string]uint64
	watchers map[string]map[chan struct{}]struct{}
	// evictions are the driver.EvictionWatcher subscribers.
	evictions map[*evictionSub]struct{}
	// recent are the evictions of the last evictionLookback, oldest
	// first, which a new subscriber is told first.
	recent []recentEviction
	// ledgers are the run ledgers (driver.Ledger), by name.
	ledgers map[string]*ledger
}

type entry struct {
	token   string
	owner   string
	fence   uint64
	expires time.Time
}

// NewStore returns an empty, private Store.
func NewStore() *Store {
	return &Store{
		holders:   map[string]*entry{},
		fences:    map[string]uint64{},
		watchers:  map[string]map[chan struct{}]struct{}{},
		evictions: map[*evictionSub]struct{}{},
		ledgers:   map[string]*ledger{},
	}
}

var shared = struct {
	sync.Mutex
	stores map[string]*Store
}{stores: map[string]*Store{}}

// Shared returns the process-wide Store called name, creating it on first
// use. mem://NAME URLs open it.
func Shared(name string) *Store {
	shared.Lock()
	defer shared.Unlock()
	s, ok := shared.stores[name]
	if !ok {
		s = NewStore()
		shared.stores[name] = s
	}
	return s
}

// Stop makes every later operation fail with ErrStopped, as if the server
// had gone away. Tests use it to check that holders detect the loss.
func (s *Store) Stop() {
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
}

// Expire deletes the lock on name as if its TTL had run out, without
// notifying waiters (a real expiry does not either). It reports whether
// the lock was held.
func (s *Store) Expire(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.live(name, time.Now())
	delete(s.holders, name)
	return ok
}

// Steal makes a foreign token, described by owner, hold name for ttl,
// whoever held it, as a takeover would. It returns the thief's fence.
func (s *Store) Steal(name, owner string, ttl time.Duration) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.grant(name, "stolen:"+owner, owner, ttl, time.Now()).fence
}

// live returns the unexpired holder of name, dropping an expired one.
// s.mu must be held.
func (s *Store) live(name string, now time.Time) (*entry, bool) {
	e, ok := s.holders[name]
	if !ok {
		return nil, false
	}
	if !now.Before(e.expires) {
		delete(s.holders, name)
		return nil, false
	}
	return e, true
}

// grant gives name to token with the next fence. s.mu must be held.
func (s *Store) grant(name, token, owner string, ttl time.Duration, now time.Time) *entry {
	s.fences[name]++
	e := &entry{token: token, owner: owner, fence: s.fences[name], expires: now.Add(ttl)}
	s.holders[name] = e
	return e
}

// notify wakes every watcher of name, without blocking. s.mu must be held.
func (s *Store) notify(name string) {
	for ch := range s.watchers[name] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}
