package gocronlock_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/examples/gocron/gocronlock"
)

// A crontab's slots are its fire times, the nearest to the run's start,
// and the ledger names the schedule by the expression.
func TestCronSlots(t *testing.T) {
	for _, c := range []struct {
		crontab     string
		withSeconds bool
		now, want   string
	}{
		{"CRON_TZ=UTC */5 * * * *", false, "12:03:00", "12:05:00"},
		{"CRON_TZ=UTC */5 * * * *", false, "12:02:29", "12:00:00"},
		{"CRON_TZ=UTC 30 * * * * *", true, "12:00:10", "12:00:30"},
		{"CRON_TZ=UTC */5 * * * *", true, "12:03:00", "12:05:00"}, // seconds optional, as gocron parses them
	} {
		s, err := gocronlock.Cron(c.crontab, c.withSeconds)
		if err != nil {
			t.Fatal(err)
		}
		now, _ := time.Parse(time.DateTime, "2026-12-05 "+c.now)
		slot, err := dlock.SlotAt(s, "", now)
		if err != nil {
			t.Fatal(err)
		}
		if got := slot.Time.Format(time.TimeOnly); got != c.want || slot.Schedule != c.crontab {
			t.Errorf("%q at %s: slot %s of %q, want %s of %q", c.crontab, c.now, got, slot.Schedule, c.want, c.crontab)
		}
	}
}

func TestCronRejectsBadExpressions(t *testing.T) {
	for _, c := range []struct {
		crontab     string
		withSeconds bool
	}{{"61 * * * *", false}, {"* * * * * *", false}, {"", true}, {"CRON_TZ=Nowhere/Atlantis * * * * *", false}} {
		_, err := gocronlock.Cron(c.crontab, c.withSeconds)
		if !errors.Is(err, dlock.ErrInvalidArgument) || !strings.Contains(err.Error(), fmt.Sprintf("%q", c.crontab)) {
			t.Errorf("Cron(%q, %v): %v, want ErrInvalidArgument quoting it", c.crontab, c.withSeconds, err)
		}
	}
}

func TestNewElectorRejectsBadInput(t *testing.T) {
	dl := openHost(t, fileURL(t), "host-a")
	for _, c := range []struct {
		name, election, value string
		dl                    *dlock.Locker
		opts                  []dlock.Option
		want                  string
	}{
		{"nil Locker", "scheduler", "10.0.0.1:80", nil, nil, "needs a dlock.Locker"},
		{"empty name", "", "10.0.0.1:80", dl, nil, "empty"},
		{"bad TTL", "scheduler", "10.0.0.1:80", dl, []dlock.Option{dlock.WithTTL(-time.Second)}, "-1s"},
		{"bad value", "scheduler", "a\u202eb", dl, nil, `"a\u202eb"`},
	} {
		_, err := gocronlock.NewElector(c.dl, c.election, c.value, c.opts...)
		if !errors.Is(err, dlock.ErrInvalidArgument) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrInvalidArgument naming %s", c.name, err, c.want)
		}
	}
}
