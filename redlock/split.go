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

// release is a release heard of: its id and how many nodes sent it.
type release struct {
	id     string
	copies int
}

// fresh reports whether a release message, from any node, wakes this
// driver's waiters. Every node where the lock was released sends one,
// all with the same id, each as soon as that node has let go. The first
// wakes the waiters at once; the one that completes a majority wakes
// them again, since an attempt woken by the first may have reached the
// other nodes before the release did and been refused there, and nobody
// else would wake it before its polling backoff. Other copies are
// dropped: one release costs each waiter at most two attempts.
func (h *hub) fresh(channel, id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if last := h.last[channel]; id != "" && last.id == id {
		last.copies++
		h.last[channel] = last
		return last.copies == h.d.quorum
	}
	if len(h.last) >= maxRemembered {
		clear(h.last)
	}
	h.last[channel] = release{id: id, copies: 1}
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
