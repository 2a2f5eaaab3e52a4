package pglock

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/internal/suggest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Scheme and SchemeAlt are the URL schemes this package registers with
// dlock.Open; both are the ones libpq and pgx accept.
const (
	Scheme    = "postgres"
	SchemeAlt = "postgresql"
)

// Mode selects how locks are kept: Lease (the default) or Advisory.
type Mode string

const (
	// Lease keeps locks as rows of a lease table with expiry by the
	// database clock. It needs Migrate once, and no pinned connections.
	Lease Mode = "lease"
	// Advisory keeps each held lock as a session advisory lock on a
	// connection pinned for the life of the lease. Fences come from a
	// sequence (Migrate once).
	Advisory Mode = "advisory"
)

// Default table names, one per mode. In lease mode the table holds the
// leases and its name is also the LISTEN/NOTIFY channel on which releases
// are announced; in advisory mode it is the prefix of the mode's objects.
// Each mode has a fence sequence named after its table plus "_seq",
// advisory mode an unlogged table of holders plus "_holders", and both the
// run ledger's tables plus "_runs" and "_ledgers" (Locker.RunOnce). In both
// modes ForceRelease announces each eviction on the NOTIFY channel named
// after the table (without its schema) plus "_evicted".
const (
	DefaultLeaseTable = "dlock_leases"
	DefaultFenceTable = "dlock_fences"
)

// Suffixes of the objects named after the table.
const (
	seqSuffix     = "_seq"
	holdersSuffix = "_holders"
	waitersSuffix = "_waiters"
	runsSuffix    = "_runs"    // the run ledger's records
	ledgersSuffix = "_ledgers" // each name's run ledger: its highest fence
	evictedSuffix = "_evicted" // a NOTIFY channel, not an object
	maxSuffix     = len(holdersSuffix)
)

// Config selects the mode and table. The zero value is lease mode on
// DefaultLeaseTable.
type Config struct {
	// Mode is Lease (default, also for "") or Advisory.
	Mode Mode
	// Table is the lease table (lease mode, default DefaultLeaseTable) or
	// the prefix of advisory mode's objects (default DefaultFenceTable):
	// a lower-case SQL identifier, optionally schema-qualified
	// ("locks.leases"), each part [a-z_][a-z0-9_]*, the schema at most 63
	// bytes and the table at most 55 (the suffixes of the objects named
	// after it must fit PostgreSQL's 63).
	Table string
}

// New returns a Locker in lease mode on the user's pool, with the lease
// table DefaultLeaseTable (call Locker.Migrate once to create it). The pool
// stays the caller's: Locker.Close does not close it. opts become the
// Locker's defaults.
func New(pool *pgxpool.Pool, opts ...dlock.Option) (*dlock.Locker, error) {
	return Config{}.Locker(pool, opts...)
}

// NewAdvisory returns a Locker in advisory mode on the user's pool, with
// the fence table DefaultFenceTable (call Locker.Migrate once to create
// it). Every held lease pins one of the pool's connections: size the pool
// (pool_max_conns) for the leases held at once plus the attempts in flight.
func NewAdvisory(pool *pgxpool.Pool, opts ...dlock.Option) (*dlock.Locker, error) {
	return Config{Mode: Advisory}.Locker(pool, opts...)
}

// Locker returns a Locker on the user's pool configured by c. The pool
// stays the caller's. An invalid mode or table is an error wrapping
// dlock.ErrInvalidArgument.
func (c Config) Locker(pool *pgxpool.Pool, opts ...dlock.Option) (*dlock.Locker, error) {
	drv, err := c.Driver(pool)
	if err != nil {
		return nil, err
	}
	return dlock.NewLocker(drv, opts...)
}

// Driver returns the bare driver, for callers assembling their own Locker
// with dlock.NewLocker. The pool stays the caller's.
func (c Config) Driver(pool *pgxpool.Pool) (driver.Driver, error) {
	if pool == nil {
		return nil, fmt.Errorf("%w: nil *pgxpool.Pool", dlock.ErrInvalidArgument)
	}
	return c.newDriver(pool, false, "")
}

func (c Config) newDriver(pool *pgxpool.Pool, ownPool bool, url string) (driver.Driver, error) {
	mode, err := c.mode()
	if err != nil {
		return nil, err
	}
	table, err := c.table(mode)
	if err != nil {
		return nil, err
	}
	b := newBase(pool, ownPool, table, mode, url)
	if mode == Advisory {
		return newAdvisory(b), nil
	}
	return newLeases(b), nil
}

func (c Config) mode() (Mode, error) {
	switch c.Mode {
	case "", Lease:
		return Lease, nil
	case Advisory:
		return Advisory, nil
	}
	hint := ""
	if near, ok := suggest.Closest(string(c.Mode), []string{string(Lease), string(Advisory)}); ok {
		hint = "; did you mean " + near + "?"
	}
	return "", fmt.Errorf("%w: pglock mode %q (want %q or %q)%s", dlock.ErrInvalidArgument, c.Mode, Lease, Advisory, hint)
}

var identPart = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// table validates the table name and returns it split into its parts.
func (c Config) table(m Mode) (pgx.Identifier, error) {
	name := c.Table
	if name == "" {
		name = DefaultLeaseTable
		if m == Advisory {
			name = DefaultFenceTable
		}
	}
	parts := strings.Split(name, ".")
	if len(parts) > 2 {
		return nil, fmt.Errorf("%w: table %q: want name or schema.name", dlock.ErrInvalidArgument, name)
	}
	for _, p := range parts {
		if !identPart.MatchString(p) {
			return nil, fmt.Errorf("%w: table %q: each part must match [a-z_][a-z0-9_]* and be at most 63 bytes", dlock.ErrInvalidArgument, name)
		}
	}
	if last := parts[len(parts)-1]; len(last)+maxSuffix > 63 {
		return nil, fmt.Errorf("%w: table %q: the table name is %d bytes, at most %d (it names objects with suffixes up to %q)",
			dlock.ErrInvalidArgument, name, len(last), 63-maxSuffix, holdersSuffix)
	}
	return pgx.Identifier(parts), nil
}

// base is what both modes share: the pool, the objects' names, the
// release and eviction channels.
type base struct {
	pool    *pgxpool.Pool
	ownPool bool
	mode    Mode
	url     string // without password, for error messages; "" on a caller's pool
	ident   pgx.Identifier
	table   string // quoted, possibly schema-qualified
	channel string // the table's own name, unquoted
	evicted string // channel + evictedSuffix: force-releases are announced on it
	names   *strings.Replacer
}

func newBase(pool *pgxpool.Pool, ownPool bool, table pgx.Identifier, mode Mode, url string) base {
	channel := table[len(table)-1]
	b := base{
		pool: pool, ownPool: ownPool, mode: mode, url: url, ident: table,
		table: table.Sanitize(), channel: channel, evicted: channel + evictedSuffix,
	}
	b.names = strings.NewReplacer(
		"{{table}}", b.table,
		"{{seq}}", b.suffixed(seqSuffix).Sanitize(),
		"{{seqname}}", "'"+b.suffixed(seqSuffix).Sanitize()+"'",
		"{{holders}}", b.suffixed(holdersSuffix).Sanitize(),
		"{{waiters}}", b.suffixed(waitersSuffix).Sanitize(),
		"{{runs}}", b.suffixed(runsSuffix).Sanitize(),
		"{{ledgers}}", b.suffixed(ledgersSuffix).Sanitize(),
		"{{tablename}}", "'"+b.table+"'",
	)
	return b
}

// suffixed is the identifier of the object named after the table plus
// suffix, in the table's schema.
func (b *base) suffixed(suffix string) pgx.Identifier {
	id := append(pgx.Identifier(nil), b.ident...)
	id[len(id)-1] += suffix
	return id
}

// sql fills the objects' names into a statement template.
func (b *base) sql(tmpl string) string { return b.names.Replace(tmpl) }

// close closes the pool if it is ours.
func (b *base) close() error {
	if b.ownPool {
		b.pool.Close()
	}
	return nil
}

// classifyAdmin is classify without the schema hint (Migrate itself, or
// an administrative call that is not about a missing schema).
func (b *base) classifyAdmin(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case codeAuthFailed, codeAuthSpec, codeNoDatabase, codePermission:
			return driver.Permanent(err)
		}
	}
	return err
}
