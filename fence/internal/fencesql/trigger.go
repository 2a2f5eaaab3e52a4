package fencesql

import (
	"strings"

	"github.com/dlockdev/dlock/fence"
)

// QuoteLiteral quotes s as an SQL string literal; both dialects double the
// single quote.
func QuoteLiteral(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// TriggerError is a trigger's rejection of a stale write: it reads as the
// *fence.StaleError parsed from detail ("offered=N current=M table=T"),
// and errors.As reaches both that and cause, the database driver's error.
func TriggerError(detail string, cause error) error {
	return &triggerError{stale: ParseDetail(detail), cause: cause}
}

type triggerError struct {
	stale *fence.StaleError
	cause error
}

func (e *triggerError) Error() string   { return e.stale.Error() }
func (e *triggerError) Unwrap() []error { return []error{e.stale, e.cause} }
