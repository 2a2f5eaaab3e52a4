package mysqllock

import (
	"errors"
	"fmt"

	"github.com/dlockdev/dlock/driver"
	"github.com/go-sql-driver/mysql"
)

// Server error numbers that retrying cannot cure. The schema ones mean
// Migrate has not run (or ran for an older mysqllock).
const (
	errNoSuchTable   = 1146 // ER_NO_SUCH_TABLE
	errBadField      = 1054 // ER_BAD_FIELD_ERROR
	errAccessDenied  = 1045 // ER_ACCESS_DENIED_ERROR: wrong user or password
	errDBAccess      = 1044 // ER_DBACCESS_DENIED_ERROR
	errTableAccess   = 1142 // ER_TABLEACCESS_DENIED_ERROR
	errUnknownDB     = 1049 // ER_BAD_DB_ERROR
	errNoDBSelected  = 1046 // ER_NO_DB_ERROR
	errUnknownSysVar = 1193 // ER_UNKNOWN_SYSTEM_VARIABLE: a URL key nobody knows
	errDeadlock      = 1213 // ER_LOCK_DEADLOCK
	errUnknownSeq    = 4091 // ER_UNKNOWN_SEQUENCES (MariaDB): the fence sequence is missing
)

// classify marks the errors that retrying cannot cure as permanent
// (driver.Permanent), and gives a missing schema the fix, naming the
// mode. Every other error is returned unchanged.
func (b *base) classify(err error) error {
	var me *mysql.MySQLError
	if err == nil || errors.Is(err, driver.ErrPermanent) || !errors.As(err, &me) {
		return err
	}
	switch me.Number {
	case errNoSuchTable, errBadField, errUnknownSeq:
		return driver.Permanent(&SchemaError{Mode: b.mode, URL: b.url, Err: err})
	case errAccessDenied, errDBAccess, errTableAccess, errUnknownDB, errNoDBSelected, errUnknownSysVar:
		return driver.Permanent(err)
	}
	return err
}

// classifyAdmin is classify without the schema hint (Migrate itself).
func (b *base) classifyAdmin(err error) error {
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number != errNoSuchTable && me.Number != errBadField && me.Number != errUnknownSeq {
		return b.classify(err)
	}
	return err
}

// SchemaError reports that the mode's tables are missing or outdated:
// Migrate has not run, or ran for an older mysqllock. It unwraps to the
// server's error.
type SchemaError struct {
	// Mode is the mode whose schema is missing.
	Mode Mode
	// URL is the database URL without its password, or "" when the
	// Locker was built on a caller's *sql.DB.
	URL string
	// Err is the server's error.
	Err error
}

func (e *SchemaError) Error() string {
	u := e.URL
	if u == "" {
		u = "…"
	}
	return fmt.Sprintf("%v: the mysqllock schema is missing or outdated: run 'dlock migrate --url %s' or Locker.Migrate once (mode=%s)",
		e.Err, u, e.Mode)
}

// Unwrap returns the server's error.
func (e *SchemaError) Unwrap() error { return e.Err }
