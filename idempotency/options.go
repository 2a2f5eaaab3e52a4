package idempotency

import (
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

// Option configures a Store.
type Option func(*config) error

type config struct {
	table     string
	retention time.Duration
	claimTTL  time.Duration
	wait      time.Duration
	owner     string
}

func defaults() config {
	host, _ := os.Hostname()
	return config{
		table: DefaultTable, retention: DefaultRetention, claimTTL: DefaultClaimTTL,
		owner: fmt.Sprintf("%s/%d", host, os.Getpid()),
	}
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{dlock.ErrInvalidArgument}, args...)...)
}

// WithTable sets the table (default DefaultTable), optionally
// schema-qualified.
func WithTable(name string) Option {
	return func(c *config) error {
		if _, err := ident(name); err != nil {
			return err
		}
		c.table = name
		return nil
	}
}

// WithRetention sets how long stored results are kept (default
// DefaultRetention, at least a millisecond).
func WithRetention(d time.Duration) Option {
	return func(c *config) error {
		if d < time.Millisecond {
			return invalid("retention %s: want at least 1ms", d)
		}
		c.retention = d
		return nil
	}
}

// WithClaimTTL sets how long a running call's claim survives without a
// heartbeat (default DefaultClaimTTL, at least 30ms): how soon a crashed
// caller's key may run again, and how long a pause it tolerates.
func WithClaimTTL(d time.Duration) Option {
	return func(c *config) error {
		if d < 30*time.Millisecond {
			return invalid("claim TTL %s: want at least 30ms", d)
		}
		c.claimTTL = d
		return nil
	}
}

// WithWait makes a Do that finds its key in progress wait up to d for the
// stored result instead of returning ErrInProgress at once (default 0).
// If the running call fails, the waiter claims the key and runs fn itself.
func WithWait(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 {
			return invalid("wait %s is negative", d)
		}
		c.wait = d
		return nil
	}
}

// WithOwner sets the description of this process that InProgressError
// shows to others (default host/pid).
func WithOwner(owner string) Option {
	return func(c *config) error {
		if owner == "" || len(owner) > 256 {
			return invalid("owner %q: want 1 to 256 bytes", owner)
		}
		c.owner = owner
		return nil
	}
}
