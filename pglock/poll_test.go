package pglock

import (
	"testing"
	"time"

	"github.com/dlockdev/dlock/driver"
)

// TestPollAfter: a lease-mode waiter that did not join the queue found
// the lock free (or its own) when it tried to join, so it attempts again
// at once, even when the lock was taken in between (the holder lookup
// then reports a holder with a long lease): sleeping maxPoll outside the
// queue was a 250 ms stall now and then under contention. A queued waiter
// sleeps until the holder's lease runs out, at most maxPoll.
func TestPollAfter(t *testing.T) {
	held := driver.Holder{Name: "n", Owner: "o", Fence: 7, TTL: 30 * time.Second}
	for _, tc := range []struct {
		name   string
		h      driver.Holder
		queued bool
		want   time.Duration
	}{
		{"not queued, free", driver.Holder{}, false, 0},
		{"not queued, taken since", held, false, 0},
		{"queued behind a long lease", held, true, maxPoll},
		{"queued behind a lease about to end", driver.Holder{Name: "n", TTL: 20 * time.Millisecond}, true, 21 * time.Millisecond},
		{"queued, holder unknown", driver.Holder{Name: "n", TTL: -1}, true, maxPoll},
	} {
		if got := pollAfter(tc.h, tc.queued); got != tc.want {
			t.Errorf("%s: pollAfter = %v, want %v", tc.name, got, tc.want)
		}
	}
}
