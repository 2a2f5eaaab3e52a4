package redlock

import "testing"

// TestReleaseCopiesWake: of the copies of one release that three nodes
// send, the first wakes the waiters and so does the second (a majority
// has let go: an attempt woken by the first may have been refused by a
// node the release had not reached yet); the third, and a copy heard
// again, do not. A new release wakes again. Without the second wake, the
// conformance suite's WakeUp once saw a waiter get the lock 5.5 s (its
// polling backoff) after the release.
func TestReleaseCopiesWake(t *testing.T) {
	h := &hub{d: &redlock{quorum: 2}, last: map[string]release{}}
	for i, c := range []struct {
		id   string
		want bool
	}{
		{"r1", true}, {"r1", true}, {"r1", false}, {"r1", false},
		{"r2", true}, {"r2", true}, {"r2", false},
	} {
		if got := h.fresh("ch", c.id); got != c.want {
			t.Errorf("copy %d of release %s: wakes %v, want %v", i+1, c.id, got, c.want)
		}
	}
}
