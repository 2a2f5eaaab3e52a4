package redislock

import (
	"hash/maphash"
	"sync/atomic"
	"time"
)

// contendedFor is how long after an attempt found a name held a wait on
// it counts as contended (see contention).
const contendedFor = time.Second

// contention remembers the names this driver's attempts found held
// lately, in a fixed number of slots (a name shares its slot with the
// names that hash alike; the last one seen keeps it), so that it costs
// the same however many names there are. A queued wait on a name seen
// held listens (on the driver's inbox, subscribed first if it is not yet)
// before its first attempt, which then is its only one; on any other name,
// while the inbox is not subscribed, it attempts first, and listens only
// if that attempt queued (then attempting again: a release may have come
// before it listened). A name forgotten or mistaken for another only
// costs a wait the longer path.
type contention struct {
	seed  maphash.Seed
	slots [256]atomic.Pointer[heldAt]
}

// heldAt is one name and when an attempt last found it held.
type heldAt struct {
	name string
	at   time.Time
}

func newContention() *contention { return &contention{seed: maphash.MakeSeed()} }

func (c *contention) slot(name string) *atomic.Pointer[heldAt] {
	return &c.slots[maphash.String(c.seed, name)%uint64(len(c.slots))]
}

// held notes that an attempt found name held now.
func (c *contention) held(name string, now time.Time) {
	c.slot(name).Store(&heldAt{name: name, at: now})
}

// recent reports whether an attempt found name held within contendedFor
// before now.
func (c *contention) recent(name string, now time.Time) bool {
	h := c.slot(name).Load()
	return h != nil && h.name == name && now.Sub(h.at) < contendedFor
}
