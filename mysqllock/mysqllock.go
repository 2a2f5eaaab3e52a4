package mysqllock

import (
	"database/sql"
	"fmt"
	"regexp"
	"strings"
	"sync/atomic"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/internal/suggest"
)

// Scheme and SchemeAlt are the URL schemes this package registers with
// dlock.Open: mysql:// and mariadb:// open the same driver.
const (
	Scheme    = "mysql"
	SchemeAlt = "mariadb"
)

// Mode selects how locks are kept: Lease (the default) or GetLock.
type Mode string

const (
	// Lease keeps locks as rows of an InnoDB lease table with expiry by
	// the database clock. It needs Migrate once, and no pinned
	// connections.
	Lease Mode = "lease"
	// GetLock keeps each held lock as a GET_LOCK named lock on a
	// connection pinned for the life of the lease. Fences come from the
	// fence counter table (Migrate once).
	GetLock Mode = "get_lock"
)

// DefaultTable is the lease table's default name. Both modes keep their
// fence counter in the table named after it plus "_fences", their run
// ledger (Locker.RunOnce) in the table plus "_runs" and "_ledgers", and
// get_lock mode its holders in the table plus "_holders".
const DefaultTable = "dlock_leases"

// Suffixes of the tables named after the lease table.
const (
	fencesSuffix  = "_fences"
	holdersSuffix = "_holders"
	seqSuffix     = "_seq" // get_lock mode's fences, on MariaDB (migrate.go)
	maxSuffix     = len(holdersSuffix)
)

// Config selects the mode and table. The zero value is lease mode on
// DefaultTable.
type Config struct {
	// Mode is Lease (default, also for "") or GetLock.
	Mode Mode
	// Table is the lease table (default DefaultTable): [a-z_][a-z0-9_]*,
	// at most 56 bytes (the tables named after it must fit MySQL's 64).
	// It lives in the connection's database.
	Table string
}

// New returns a Locker in lease mode on the user's *sql.DB (opened with
// the go-sql-driver/mysql driver), with the lease table DefaultTable (call
// Locker.Migrate once to create it). The *sql.DB stays the caller's:
// Locker.Close does not close it. opts become the Locker's defaults.
func New(db *sql.DB, opts ...dlock.Option) (*dlock.Locker, error) {
	return Config{}.Locker(db, opts...)
}

// Locker returns a Locker on the user's *sql.DB configured by c. The
// *sql.DB stays the caller's. An invalid mode or table is an error
// wrapping dlock.ErrInvalidArgument.
func (c Config) Locker(db *sql.DB, opts ...dlock.Option) (*dlock.Locker, error) {
	drv, err := c.Driver(db)
	if err != nil {
		return nil, err
	}
	return dlock.NewLocker(drv, opts...)
}

// Driver returns the bare driver, for callers assembling their own Locker
// with dlock.NewLocker. The *sql.DB stays the caller's.
func (c Config) Driver(db *sql.DB) (driver.Driver, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: nil *sql.DB", dlock.ErrInvalidArgument)
	}
	return c.newDriver(db, false, "")
}

func (c Config) newDriver(db *sql.DB, ownDB bool, url string) (driver.Driver, error) {
	mode, err := c.mode()
	if err != nil {
		return nil, err
	}
	table, err := c.table()
	if err != nil {
		return nil, err
	}
	b := newBase(db, ownDB, table, mode, url)
	if mode == GetLock {
		return newGetLocks(b), nil
	}
	return newLeases(b), nil
}

func (c Config) mode() (Mode, error) {
	switch c.Mode {
	case "", Lease:
		return Lease, nil
	case GetLock:
		return GetLock, nil
	}
	hint := ""
	if near, ok := suggest.Closest(string(c.Mode), []string{string(Lease), string(GetLock)}); ok {
		hint = "; did you mean " + near + "?"
	}
	return "", fmt.Errorf("%w: mysqllock mode %q (want %q or %q)%s", dlock.ErrInvalidArgument, c.Mode, Lease, GetLock, hint)
}

var identRE = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

func (c Config) table() (string, error) {
	name := c.Table
	if name == "" {
		name = DefaultTable
	}
	if !identRE.MatchString(name) {
		return "", fmt.Errorf("%w: table %q: want [a-z_][a-z0-9_]* (a table in the connection's database)", dlock.ErrInvalidArgument, name)
	}
	if len(name)+maxSuffix > 64 {
		return "", fmt.Errorf("%w: table %q is %d bytes, at most %d (it names tables with suffixes up to %q)",
			dlock.ErrInvalidArgument, name, len(name), 64-maxSuffix, holdersSuffix)
	}
	return name, nil
}

// base is what both modes share: the pool, the tables' names.
type base struct {
	db    *sql.DB
	ownDB bool
	mode  Mode
	url   string // without password, for error messages; "" on a caller's pool
	table string // unquoted
	names *strings.Replacer
	draw  string        // drawFence, with the tables' names
	multi *atomic.Int32 // batching (batch.go)
}

func newBase(db *sql.DB, ownDB bool, table string, mode Mode, url string) base {
	b := base{db: db, ownDB: ownDB, mode: mode, url: url, table: table, multi: newBatchState()}
	b.names = strings.NewReplacer(
		"{{table}}", "`"+table+"`",
		"{{fences}}", "`"+table+fencesSuffix+"`",
		"{{holders}}", "`"+table+holdersSuffix+"`",
		"{{seq}}", "`"+table+seqSuffix+"`",
		"{{runs}}", "`"+table+runsSuffix+"`",
		"{{ledgers}}", "`"+table+ledgersSuffix+"`",
	)
	b.draw = b.sql(drawFence)
	return b
}

// sql fills the tables' names into a statement template.
func (b *base) sql(tmpl string) string { return b.names.Replace(tmpl) }

// close closes the pool if it is ours.
func (b *base) close() error {
	if b.ownDB {
		return b.db.Close()
	}
	return nil
}

var (
	_ driver.SettingsReporter = (*leases)(nil)
	_ driver.SettingsReporter = (*getLocks)(nil)
)

// Settings implements driver.SettingsReporter: mode and table, as a URL
// gives them.
func (b *base) Settings() map[string]string {
	return map[string]string{keyMode: string(b.mode), keyTable: b.table}
}
