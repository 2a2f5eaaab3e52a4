package pglock

import (
	"testing"
	"time"
)

// TestPollBehind: a waiter queued behind a lock reserved for another
// waiter (a release handed it over) attempts again when the reservation
// lapses, for nobody is notified then; before, it slept maxPoll (250 ms)
// whenever the reserved waiter never came.
func TestPollBehind(t *testing.T) {
	for _, tc := range []struct {
		name           string
		poll, reserved time.Duration
		want           time.Duration
	}{
		{"not in hand-over", maxPoll, -1, maxPoll},
		{"behind a reservation", maxPoll, 30 * time.Millisecond, 31 * time.Millisecond},
		{"behind a reservation that lapsed", maxPoll, 0, time.Millisecond},
		{"holder's lease ends first", 5 * time.Millisecond, 30 * time.Millisecond, 5 * time.Millisecond},
	} {
		if got := pollBehind(tc.poll, tc.reserved); got != tc.want {
			t.Errorf("%s: pollBehind(%v, %v) = %v, want %v", tc.name, tc.poll, tc.reserved, got, tc.want)
		}
	}
}
