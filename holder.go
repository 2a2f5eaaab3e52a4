package dlock

import (
	"fmt"
	"time"

	"github.com/dlockdev/dlock/driver"
)

// Holder is what the backend knows about whoever holds a lock.
type Holder struct {
	// Name is the lock's name.
	Name string
	// Owner is the holder's self-description (WithOwner; default host/pid).
	Owner string
	// Fence is the holder's fencing token.
	Fence uint64
	// TTL is the time left on the holder's lease as the backend counts it;
	// negative when unknown or unbounded (session-bound locks).
	TTL time.Duration
	// Kind is what the grant is: KindMutex for a plain lock, or a permit,
	// read, write or leader grant of a Semaphore, RWMutex or Election
	// (whose name Name then is).
	Kind Kind
	// Permits is a semaphore permit's semaphore size; 0 otherwise.
	Permits int
	// Slot is a semaphore permit's index (0 to Permits-1) or a read
	// grant's slot; -1 otherwise.
	Slot int
}

// holderFrom is a driver's holder, its key taken apart into a name, a
// kind and the kind's numbers.
func holderFrom(h driver.Holder) Holder {
	ki := parseKey(h.Name)
	return Holder{Name: ki.name, Owner: h.Owner, Fence: h.Fence, TTL: h.TTL, Kind: ki.kind, Permits: ki.permits, Slot: ki.slot}
}

// String describes the holder for people: its owner, fence and the time
// left, e.g. "vm/24413, fence 1, 29s left" (whole seconds above 10 s),
// or "no expiry (session-bound)" for a lock that lives as long as its
// session. It is the text of a HeldError.
func (h Holder) String() string {
	owner := h.Owner
	if owner == "" {
		owner = "an unknown owner"
	}
	s := owner
	if h.Fence > 0 {
		s += fmt.Sprintf(", fence %d", h.Fence)
	}
	if h.TTL >= 0 {
		s += ", " + roundLeft(h.TTL).String() + " left"
	} else {
		s += ", no expiry (session-bound)"
	}
	return s
}

// roundLeft rounds a time left for people: whole seconds above 10 s,
// milliseconds below.
func roundLeft(d time.Duration) time.Duration {
	if d >= 10*time.Second {
		return d.Round(time.Second)
	}
	return d.Round(time.Millisecond)
}

// backendKey is the key the holder's grant lives under.
func (h Holder) backendKey() string {
	switch h.Kind {
	case KindMutex, "":
		return h.Name
	case KindPermit:
		return key(h.Name, h.Kind, h.Permits, h.Slot)
	case KindRead:
		return key(h.Name, h.Kind, h.Slot)
	}
	return key(h.Name, h.Kind)
}

// holds reports whether hs has a grant of kind k.
func holds(hs []Holder, k Kind) bool {
	for _, h := range hs {
		if h.Kind == k {
			return true
		}
	}
	return false
}

// only returns the grants of kind k in hs.
func only(hs []Holder, k Kind) []Holder {
	var out []Holder
	for _, h := range hs {
		if h.Kind == k {
			out = append(out, h)
		}
	}
	return out
}

// first returns the first grant of kind k in hs (a zero Holder of that
// kind when there is none).
func first(hs []Holder, k Kind) Holder {
	for _, h := range hs {
		if h.Kind == k {
			return h
		}
	}
	return Holder{Kind: k, Slot: -1, TTL: -1}
}
