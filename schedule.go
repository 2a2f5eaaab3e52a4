package dlock

import (
	"fmt"
	"time"
)

// Schedule is when a job is due: Next returns the first schedule point
// after t. robfig/cron's cron.Schedule (a parsed crontab expression)
// satisfies it, and so does Every.
type Schedule interface {
	Next(t time.Time) time.Time
}

// Slot is one schedule point of a job: the time it was due, and the
// schedule it is a point of (for the run ledger: "every 1h0m0s", or the
// crontab expression). Every host that names the same Slot for a run of
// the same lock name runs it at most once between them (Locker.RunOnce).
type Slot struct {
	Time     time.Time
	Schedule string
}

// String is the slot's time in UTC, RFC 3339 with as many fractional
// seconds as it has.
func (s Slot) String() string { return s.Time.UTC().Format(time.RFC3339Nano) }

// every is the Schedule of Every.
type every struct{ period time.Duration }

// Every returns the Schedule of a job due every period: the multiples of
// period since the Unix epoch, in UTC (so every host computes the same
// points, whatever its time zone). period must be positive.
func Every(period time.Duration) (Schedule, error) {
	if period <= 0 {
		return nil, invalid("period %s: want a positive duration", period)
	}
	return every{period}, nil
}

// Next implements Schedule.
func (e every) Next(t time.Time) time.Time { return e.floor(t).Add(e.period) }

// floor is the last point at or before t.
func (e every) floor(t time.Time) time.Time {
	ns := t.UnixNano()
	p := int64(e.period)
	f := ns - ns%p
	if ns%p < 0 {
		f -= p
	}
	return time.Unix(0, f).UTC()
}

// String names the schedule in the run ledger.
func (e every) String() string { return "every " + e.period.String() }

// SlotAt returns the slot a run started at now belongs to: the point of s
// nearest to now, earlier or later (a tie goes to the earlier). So every
// host that starts within half the gap between two points of the point
// it was due at — by the clock that reads now — names the same slot: a
// host whose cron fires late, or whose clock is off and whose cron fires
// by that same clock, still names its run's slot. name is what the run
// ledger records as the schedule ("" for Every's own name).
func SlotAt(s Schedule, name string, now time.Time) (Slot, error) {
	if s == nil {
		return Slot{}, invalid("nil schedule")
	}
	if name == "" {
		if st, ok := s.(fmt.Stringer); ok {
			name = st.String()
		}
	}
	if e, ok := s.(every); ok {
		prev := e.floor(now)
		next := prev.Add(e.period)
		if now.Sub(prev) <= next.Sub(now) {
			return Slot{prev, name}, nil
		}
		return Slot{next, name}, nil
	}
	next := s.Next(now)
	if next.IsZero() {
		return Slot{}, invalid("schedule %q has no point after %s", name, now.Format(time.RFC3339))
	}
	prev, ok := previous(s, now)
	if ok && now.Sub(prev) <= next.Sub(now) {
		return Slot{prev.UTC(), name}, nil
	}
	return Slot{next.UTC(), name}, nil
}

// previous finds the last point of s at or before now, looking back up to
// about eight years (a crontab schedule repeats within four), and reports
// whether there is one.
func previous(s Schedule, now time.Time) (time.Time, bool) {
	for back := time.Minute; back < 8*366*24*time.Hour; back *= 4 {
		p := s.Next(now.Add(-back))
		if p.IsZero() || p.After(now) {
			continue
		}
		for {
			q := s.Next(p)
			if q.IsZero() || q.After(now) || !q.After(p) {
				return p, true
			}
			p = q
		}
	}
	return time.Time{}, false
}
