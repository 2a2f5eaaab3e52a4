package gocronlock

import (
	"fmt"

	"github.com/dlockdev/dlock"
	"github.com/robfig/cron/v3"
)

// Cron parses crontab as gocron.CronJob(crontab, withSeconds) does
// (robfig/cron; withSeconds allows a leading seconds field), for a Locker
// whose jobs are CronJobs: the slots are the expression's fire times, and
// the ledger names the schedule by the expression. Like cron, it reads the
// expression in the local time zone unless it starts with CRON_TZ=Zone:
// give it the scheduler's location (gocron.WithLocation) the same way. A
// bad expression is an error that quotes it.
func Cron(crontab string, withSeconds bool) (dlock.Schedule, error) {
	parse := cron.ParseStandard
	if withSeconds {
		parse = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor).Parse
	}
	s, err := parse(crontab)
	if err != nil {
		return nil, fmt.Errorf("gocronlock: crontab %q: %w: %w", crontab, err, dlock.ErrInvalidArgument)
	}
	return cronSchedule{s, crontab}, nil
}

// cronSchedule is a parsed crontab that the ledger names by its text.
type cronSchedule struct {
	cron.Schedule
	text string
}

// String is the crontab expression.
func (c cronSchedule) String() string { return c.text }
