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
}

func holderFrom(h driver.Holder) Holder {
	return Holder{Name: h.Name, Owner: h.Owner, Fence: h.Fence, TTL: h.TTL}
}

func (h Holder) describe() string {
	owner := h.Owner
	if owner == "" {
		owner = "an unknown owner"
	}
	s := fmt.Sprintf("%s, fence %d", owner, h.Fence)
	if h.TTL >= 0 {
		s += fmt.Sprintf(", %s left", h.TTL.Round(time.Millisecond))
	}
	return s
}
