package redlock

import (
	"math/rand/v2"
	"time"
)

// Contention. With N nodes asked in parallel, contenders that start at the
// same moment take the nodes in a different order on each, and often
// nobody gets a majority (a split vote): all fail, clean up, and — as
// nobody released anything — nobody is notified. Gate mode (gate.go)
// keeps waiters from splitting; a first attempt can still split with a
// waiter. After a split, the waiters of the drivers that took part are
// nudged, each after its own random delay, so that one of them is likely
// to try alone. A nudge is only a hint to look again; the portable layer
// still decides when to try.

// maxRemembered bounds the hub's per-name memories.
const maxRemembered = 1024

// fresh reports whether a release message, from any node, is the first
// of its release. Every node where the lock was released sends one, all
// with the same id: the first wakes this driver's waiters, the copies are
// dropped, so that one release costs each waiter one attempt.
func (h *hub) fresh(channel, id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if id != "" && h.last[channel] == id {
		return false
	}
	if len(h.last) >= maxRemembered {
		clear(h.last)
	}
	h.last[channel] = id
	return true
}

// nudge wakes name's watchers in this driver after a split attempt that
// took took, each after its own random delay within a few attempt times.
func (h *hub) nudge(name string, took time.Duration) {
	window := max(2*took, 4*h.d.slot(), time.Millisecond)
	for _, w := range h.waiters(name) {
		time.AfterFunc(took+rand.N(window), w.Wake)
	}
}

// slot is the driver's recent attempt duration (an exponentially weighted
// average), bounded to [100µs, node timeout].
func (d *redlock) slot() time.Duration {
	s := time.Duration(d.slotNs.Load())
	if s == 0 {
		s = time.Millisecond
	}
	return min(max(s, 100*time.Microsecond), d.cfg.nodeTimeout)
}

// observe folds one attempt's duration into slot.
func (d *redlock) observe(took time.Duration) {
	old := d.slotNs.Load()
	if old == 0 {
		old = int64(took)
	}
	d.slotNs.Store(old - old/8 + int64(took)/8)
}
