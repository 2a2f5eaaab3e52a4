package serve

import (
	"sync"
	"time"

	"github.com/dlockdev/dlock"
)

// endedKeep is how long the table remembers a lease that ended on its
// own (lost), so that its client's next call is told "lost", not "unknown".
const endedKeep = time.Minute

// entry is one lease the server holds for a client.
type entry struct {
	id    string
	lease *dlock.Lease
	// lastSeen is the client's last renew (or the grant); streams counts
	// its open events streams. Either keeps the lease.
	lastSeen time.Time
	streams  int
	endedAt  time.Time // when the table saw the lease end; zero while held
	granted  time.Time
	permits  int    // a semaphore permit's semaphore size
	owner    string // the client it belongs to (ownerOf)
}

// leaseTable maps lease ids (sealed handles, seal.go) to the leases this
// server keeps.
type leaseTable struct {
	mu     sync.Mutex
	m      map[string]*entry
	closed bool // the server is closing: no new entries
	// adopting holds the ids being adopted (Server.adopt): a second
	// request for one waits for the first instead of adopting it twice.
	adopting map[string]chan struct{}
}

func newLeaseTable() *leaseTable {
	return &leaseTable{m: map[string]*entry{}, adopting: map[string]chan struct{}{}}
}

// add stores e, or returns the entry already stored under its id; false
// means the table is closed and e was not stored.
func (t *leaseTable) add(e *entry) (*entry, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, false
	}
	if old, ok := t.m[e.id]; ok && old.endedAt.IsZero() && old.lease.Err() == nil {
		return old, true
	}
	t.m[e.id] = e
	return e, true
}

// claim makes the caller the one adopting id: it returns nil when the
// caller adopts (and must call unclaim), or a channel closed when the
// adoption under way ends (then look the id up again).
func (t *leaseTable) claim(id string) <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	if ch, ok := t.adopting[id]; ok {
		return ch
	}
	t.adopting[id] = make(chan struct{})
	return nil
}

// unclaim ends an adoption claim, waking those waiting on it.
func (t *leaseTable) unclaim(id string) {
	t.mu.Lock()
	ch := t.adopting[id]
	delete(t.adopting, id)
	t.mu.Unlock()
	close(ch)
}

func (t *leaseTable) get(id string) (*entry, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.m[id]
	return e, ok
}

// touch records a sign of life from the lease's client.
func (t *leaseTable) touch(e *entry) {
	t.mu.Lock()
	e.lastSeen = time.Now()
	t.mu.Unlock()
}

// stream counts an events stream opening (+1) or closing (-1); a closing
// stream counts as a sign of life, so the TTL runs from then.
func (t *leaseTable) stream(e *entry, delta int) {
	t.mu.Lock()
	e.streams += delta
	e.lastSeen = time.Now()
	t.mu.Unlock()
}

// remove forgets e, unless its id now stands for another entry (a lease
// adopted again after e was let go).
func (t *leaseTable) remove(e *entry) {
	t.mu.Lock()
	if t.m[e.id] == e {
		delete(t.m, e.id)
	}
	t.mu.Unlock()
}

// abandoned returns the held leases whose client showed no sign of life
// for their TTL, and forgets ended leases after endedKeep.
func (t *leaseTable) abandoned(now time.Time) []*entry {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []*entry
	for id, e := range t.m {
		if e.lease.Err() != nil {
			if e.endedAt.IsZero() {
				e.endedAt = now
			} else if now.Sub(e.endedAt) > endedKeep {
				delete(t.m, id)
			}
			continue
		}
		if e.streams == 0 && now.Sub(e.lastSeen) > e.lease.TTL() {
			out = append(out, e)
		}
	}
	return out
}

// drain closes the table to new leases, forgets every lease and returns
// the held ones.
func (t *leaseTable) drain() []*dlock.Lease {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	var out []*dlock.Lease
	for id, e := range t.m {
		if e.lease.Err() == nil {
			out = append(out, e.lease)
		}
		delete(t.m, id)
	}
	return out
}

// ages returns the grant time of every held lease, by name and fence.
func (t *leaseTable) ages() map[ageKey]time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[ageKey]time.Time, len(t.m))
	for _, e := range t.m {
		if e.endedAt.IsZero() {
			out[ageKey{e.lease.Name(), e.lease.Fence()}] = e.granted
		}
	}
	return out
}

// ageKey identifies a grant in a listing.
type ageKey struct {
	name  string
	fence uint64
}
