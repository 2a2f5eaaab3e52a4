package pglock

import (
	"errors"
	"fmt"
	"net/url"

	"github.com/dlockdev/dlock/driver"
	"github.com/jackc/pgx/v5/pgconn"
)

// SQLSTATEs that retrying cannot cure. The schema ones mean Migrate has
// not run (or ran for the other mode, or for an older pglock).
const (
	codeUndefinedTable  = "42P01"
	codeUndefinedColumn = "42703"
	codeUndefinedSchema = "3F000"
	codeUndefinedFunc   = "42883"
	codeAuthFailed      = "28P01"
	codeAuthSpec        = "28000"
	codeNoDatabase      = "3D000"
	codePermission      = "42501"
	// A run-time parameter the server does not know, or a bad value for
	// one, sent at connect from a URL query key.
	codeUnknownSetting  = "42704"
	codeBadSettingValue = "22023"
)

// codeAdminShutdown is the FATAL error of a session ended "due to
// administrator command": pg_terminate_backend, or a server shutdown.
const codeAdminShutdown = "57P01"

// classify marks the errors that retrying cannot cure as permanent
// (driver.Permanent), and gives a missing schema the fix, naming the mode.
// Every other error is returned unchanged. It never turns an error into
// anything but an error.
func (b *base) classify(err error) error {
	var pgErr *pgconn.PgError
	if err == nil || errors.Is(err, driver.ErrPermanent) || !errors.As(err, &pgErr) {
		return err
	}
	switch pgErr.Code {
	case codeUndefinedTable, codeUndefinedColumn, codeUndefinedSchema, codeUndefinedFunc:
		return driver.Permanent(&SchemaError{Mode: b.mode, URL: b.url, Err: err})
	case codePermission:
		return driver.Permanent(b.privilegeError(pgErr, err))
	case codeAuthFailed, codeAuthSpec, codeNoDatabase:
		return driver.Permanent(err)
	}
	return err
}

// SchemaError reports that the mode's tables or sequence are missing or
// outdated: Migrate has not run for this mode (each mode has its own
// schema), or ran for an older pglock. It unwraps to the server's error.
type SchemaError struct {
	// Mode is the mode whose schema is missing.
	Mode Mode
	// URL is the database URL without its password, or "" when the
	// Locker was built on a pool.
	URL string
	// Err is the server's error.
	Err error
}

func (e *SchemaError) Error() string {
	u := e.URL
	if u == "" {
		u = "…"
	}
	return fmt.Sprintf("%v: the %s-mode schema is missing or outdated: run 'dlock migrate --url %s' or Locker.Migrate once (mode=%s)",
		e.Err, e.Mode, u, e.Mode)
}

// Unwrap returns the server's error.
func (e *SchemaError) Unwrap() error { return e.Err }

// redact returns rawURL without its password (and with mode set), for
// messages; "" when it does not parse.
func redact(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return ""
	}
	if u.User != nil {
		u.User = url.User(u.User.Username())
	}
	q := u.Query()
	q.Del("password")
	u.RawQuery = q.Encode()
	return u.String()
}
