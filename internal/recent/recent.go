// Package recent remembers the names a driver saw contended lately, so
// that its next call on such a name can take the path made for
// contention (a queued wait at once, a release that hands the lock over)
// while a name nobody contends keeps the cheapest one.
package recent

import (
	"sync"
	"time"
)

// Names is a set of names, each remembered for the time given to New
// after it was last seen. At most the number given to New are kept: all
// are forgotten when that is reached.
// The zero value is not usable; use New.
type Names struct {
	forTime time.Duration
	most    int

	mu    sync.Mutex
	names map[string]time.Time
}

// New returns a set that remembers a name for d after it was last seen,
// and at most most names.
func New(d time.Duration, most int) *Names {
	return &Names{forTime: d, most: most}
}

// Saw notes that name was contended now.
func (n *Names) Saw(name string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.names == nil || len(n.names) >= n.most {
		n.names = map[string]time.Time{}
	}
	n.names[name] = time.Now()
}

// Lately reports whether name was seen contended within the set's time.
func (n *Names) Lately(name string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	at, ok := n.names[name]
	return ok && time.Since(at) < n.forTime
}
