package mysqllock

import (
	"fmt"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/driver"
)

// What the run ledger's columns hold (ledgerDDL): DATETIME(6) keeps the
// years 1000 to 9999 to the microsecond; schedules and owners are
// VARBINARY(1024).
var (
	minDatetime = time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC)
	maxDatetime = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
)

const maxRunText = 1024

// checkRun refuses a record the tables would round, cut or reject: a slot
// with a fraction of a microsecond (two slots a nanosecond apart would be
// one record, and a slot read back would not equal the one claimed), a
// time outside DATETIME's years, a schedule or owner too long.
func checkRun(rec driver.RunRecord) error {
	if rec.Slot.Nanosecond()%1000 != 0 {
		return invalidRun("slot %s has a fraction of a microsecond; the MySQL run ledger keeps slots to the microsecond",
			rec.Slot.UTC().Format(time.RFC3339Nano))
	}
	for _, t := range []struct {
		what string
		at   time.Time
	}{{"slot", rec.Slot}, {"start", rec.Started}, {"end", rec.Ended}} {
		if (t.what != "end" || !t.at.IsZero()) && (t.at.Before(minDatetime) || !t.at.Before(maxDatetime)) {
			return invalidRun("run of %q: %s %s is outside the years 1000 to 9999 that MySQL's DATETIME holds",
				rec.Name, t.what, t.at.UTC().Format(time.RFC3339Nano))
		}
	}
	if len(rec.Schedule) > maxRunText || len(rec.Owner) > maxRunText {
		return invalidRun("run of %q: schedule of %d bytes or owner of %d bytes: the MySQL run ledger keeps at most %d",
			rec.Name, len(rec.Schedule), len(rec.Owner), maxRunText)
	}
	return nil
}

// invalidRun is a permanent ErrInvalidArgument about a ledger call.
func invalidRun(format string, args ...any) error {
	return driver.Permanent(fmt.Errorf("%w: "+format, append([]any{dlock.ErrInvalidArgument}, args...)...))
}

// datetime formats t for a DATETIME(6) column, in UTC.
func datetime(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05.000000") }

// nullDatetime is datetime(t), or NULL for the zero time (a run without
// an outcome).
func nullDatetime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return datetime(t)
}
