package idempotency

import (
	"cmp"
	"fmt"
	"os"
	"time"

	"github.com/dlockdev/dlock"
)

// Defaults.
const (
	// DefaultTable is the table Migrate creates and Do uses.
	DefaultTable = "dlock_idempotency"
	// DefaultRetention is how long a stored result is kept.
	DefaultRetention = 24 * time.Hour
	// DefaultClaimTTL is how long a claim outlives its last heartbeat.
	DefaultClaimTTL = time.Minute
)

// Limits on Config's fields.
const (
	minRetention = time.Millisecond
	minClaimTTL  = 30 * time.Millisecond
	maxOwner     = 256
)

// Config configures a Store. The zero value means the defaults; each
// field's zero value is its default.
type Config struct {
	// Table is the table, optionally schema-qualified ("billing.idem");
	// default DefaultTable.
	Table string
	// Retention is how long stored results are kept, after which the key
	// may run again; default DefaultRetention, at least 1ms.
	Retention time.Duration
	// ClaimTTL is how long a running call's claim survives without a
	// heartbeat: how soon a crashed caller's key may run again, and how
	// long a pause it tolerates; default DefaultClaimTTL, at least 30ms.
	ClaimTTL time.Duration
	// Wait is how long a Do that finds its key in progress waits for the
	// stored result; the default 0 returns ErrInProgress at once. If the
	// running call fails, the waiter claims the key and runs fn itself.
	Wait time.Duration
	// Owner describes this process to others in InProgressError; default
	// host/pid, at most 256 bytes.
	Owner string
}

// New returns a Store over db with the defaults: Config{}.Store(db).
func New(db DB) (*Store, error) {
	return Config{}.Store(db)
}

// Store returns a Store over db configured by c. Call Migrate once to
// create its table. A nil db or an invalid field is an error wrapping
// dlock.ErrInvalidArgument that names the field and its value.
func (c Config) Store(db DB) (*Store, error) {
	if db == nil {
		return nil, invalid("nil database")
	}
	c, err := c.resolve()
	if err != nil {
		return nil, err
	}
	t, err := ident(c.Table)
	if err != nil {
		return nil, err
	}
	return &Store{db: db, cfg: c, table: t}, nil
}

// resolve checks c and fills in the defaults.
func (c Config) resolve() (Config, error) {
	switch {
	case c.Retention != 0 && c.Retention < minRetention:
		return c, invalid("Config.Retention %s: want at least %s (or 0 for %s)", c.Retention, minRetention, DefaultRetention)
	case c.ClaimTTL != 0 && c.ClaimTTL < minClaimTTL:
		return c, invalid("Config.ClaimTTL %s: want at least %s (or 0 for %s)", c.ClaimTTL, minClaimTTL, DefaultClaimTTL)
	case c.Wait < 0:
		return c, invalid("Config.Wait %s is negative (0 returns ErrInProgress at once)", c.Wait)
	case len(c.Owner) > maxOwner:
		return c, invalid("Config.Owner %q is %d bytes: want at most %d", c.Owner, len(c.Owner), maxOwner)
	}
	c.Table = cmp.Or(c.Table, DefaultTable)
	c.Retention = cmp.Or(c.Retention, DefaultRetention)
	c.ClaimTTL = cmp.Or(c.ClaimTTL, DefaultClaimTTL)
	if c.Owner == "" {
		host, _ := os.Hostname()
		c.Owner = fmt.Sprintf("%s/%d", host, os.Getpid())
	}
	return c, nil
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: idempotency: "+format, append([]any{dlock.ErrInvalidArgument}, args...)...)
}
