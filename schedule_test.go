package dlock_test

import (
	"testing"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/dlockdev/dlock"
)

// TestSlotAt: a run belongs to the schedule point nearest its start, so
// hosts that start up to half a period early or late name the same slot.
func TestSlotAt(t *testing.T) {
	every, err := dlock.Every(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	daily, err := cron.ParseStandard("0 2 * * *")
	if err != nil {
		t.Fatal(err)
	}
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, c := range []struct {
		name  string
		s     dlock.Schedule
		now   string
		want  string
		sched string
	}{
		{"on the point", every, "2026-12-05T02:00:00Z", "2026-12-05T02:00:00Z", "every 1h0m0s"},
		{"late", every, "2026-12-05T02:29:59Z", "2026-12-05T02:00:00Z", "every 1h0m0s"},
		{"early", every, "2026-12-05T01:30:01Z", "2026-12-05T02:00:00Z", "every 1h0m0s"},
		{"a tie goes to the earlier", every, "2026-12-05T01:30:00Z", "2026-12-05T01:00:00Z", "every 1h0m0s"},
		{"another zone names the same slot", every, "2026-12-05T03:10:00+01:00", "2026-12-05T02:00:00Z", "every 1h0m0s"},
		{"before the epoch", every, "1969-12-31T23:20:00Z", "1969-12-31T23:00:00Z", "every 1h0m0s"},
		{"cron, fired late", daily, "2026-12-05T02:00:07Z", "2026-12-05T02:00:00Z", "0 2 * * *"},
		{"cron, clock 3 s ahead", daily, "2026-12-05T01:59:57Z", "2026-12-05T02:00:00Z", "0 2 * * *"},
		{"cron, the day after", daily, "2026-12-05T13:59:59Z", "2026-12-05T02:00:00Z", "0 2 * * *"},
		{"cron, toward the next", daily, "2026-12-05T14:00:01Z", "2026-12-06T02:00:00Z", "0 2 * * *"},
	} {
		name := ""
		if c.s == daily {
			name = "0 2 * * *"
		}
		slot, err := dlock.SlotAt(c.s, name, at(c.now))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !slot.Time.Equal(at(c.want)) || slot.Schedule != c.sched || slot.String() != c.want {
			t.Errorf("%s: SlotAt(%s) = %s %q, want %s %q", c.name, c.now, slot, slot.Schedule, c.want, c.sched)
		}
	}
	if _, err := dlock.Every(0); err == nil {
		t.Error("Every(0) accepted a zero period")
	}
	if _, err := dlock.Every(-time.Second); err == nil {
		t.Error("Every(-1s) accepted a negative period")
	}
}
