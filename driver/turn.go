package driver

import "time"

// Turn is when a waiter's last attempt was sent (this host's clock) and
// ran (the backend's clock, in microseconds since the epoch). A Queuer
// whose backend hands the lock to a waiter in the holder's release (a
// hand-off, Grant.Window) uses it to map the hand-off's backend time to
// this host's clock for Grant.Since.
type Turn struct {
	Sent time.Time
	Ran  int64
}

// Since is the local start of a grant the backend made at its time us:
// the last attempt's send time plus the backend time elapsed since that
// attempt ran. The attempt ran after it was sent, so this is never after
// the grant (clocks drifting aside, which ClockDrift allows for), and it
// is never in the future.
func (t Turn) Since(us int64) time.Time {
	s := t.Sent
	if us > t.Ran {
		s = s.Add(time.Duration(us-t.Ran) * time.Microsecond)
	}
	if now := time.Now(); s.After(now) {
		return now
	}
	return s
}
