package filelock

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/driver"
)

// Scheme is the URL scheme this package registers with dlock.Open.
const Scheme = "file"

// BusyTimeout is how long one statement waits for another process's write
// transaction to finish before failing with SQLITE_BUSY. Transactions here
// last microseconds, so reaching it means a stuck process.
const BusyTimeout = 5000 // milliseconds

// Values of Config.Sync and of the sync URL query key.
const (
	// SyncNormal (the default) makes commits durable against any process
	// crash, and syncs to disk at checkpoints: an OS crash or power cut can
	// undo the last grants, and so hand their fences out again, but only
	// after every holder has died with the host.
	SyncNormal = "normal"
	// SyncFull syncs every commit to disk: no fence is ever handed out
	// twice, even across a power cut, at several times the cost per grant.
	SyncFull = "full"
)

// Config configures a lock database opened by path. The zero value means
// the defaults.
type Config struct {
	// Sync is SyncNormal (the default, also for "") or SyncFull; URL query
	// key sync. It applies to a database this package opens by path; a
	// caller's *sql.DB keeps the synchronous pragma its DSN set, and a
	// non-empty Sync with one is an error.
	Sync string
	// Retention is how long the row of a name nobody holds is kept after
	// its release or expiry; URL query key retention (a Go duration).
	// Default DefaultRetention; negative is an error. Pruned rows raise a
	// fence floor that every new row starts above, so fences still
	// strictly increase per name (see the package doc's Fencing tokens).
	Retention time.Duration
}

// DefaultRetention is Config.Retention's default.
const DefaultRetention = time.Hour

// New opens (creating if needed) the lock database at path, an absolute
// file name, and returns a Locker on it, with the defaults of Config.
// Missing parent directories are created with mode 0700. opts become the
// Locker's defaults.
func New(path string, opts ...dlock.Option) (*dlock.Locker, error) {
	return Config{}.Locker(path, opts...)
}

// Locker opens (creating if needed) the lock database at path, an
// absolute file name, and returns a Locker on it configured by c. Every
// Locker opened on one file and Sync in this process shares one
// connection. An invalid path or Sync is an error wrapping
// dlock.ErrInvalidArgument.
func (c Config) Locker(path string, opts ...dlock.Option) (*dlock.Locker, error) {
	d, err := c.openPath(context.Background(), path)
	if err != nil {
		return nil, err
	}
	return newLocker(d, opts)
}

// Driver returns the bare driver on the lock database at path, for
// callers assembling their own Locker with dlock.NewLocker; closing it
// closes the database once no other handle in the process uses it.
func (c Config) Driver(path string) (driver.Driver, error) {
	d, err := c.openPath(context.Background(), path)
	if err != nil {
		return nil, err
	}
	return d, nil
}

func (c Config) openPath(ctx context.Context, path string) (*fileDriver, error) {
	c, err := c.resolve()
	if err != nil {
		return nil, err
	}
	if err := checkPath(path); err != nil {
		return nil, err
	}
	d, err := openDriver(ctx, path, c)
	if err != nil {
		return nil, fmt.Errorf("filelock: open %s: %w", path, err)
	}
	return d, nil
}

// NewDB returns a Locker on the caller's SQLite database, with the
// defaults of Config; see Config.DBLocker.
func NewDB(db *sql.DB, opts ...dlock.Option) (*dlock.Locker, error) {
	return Config{}.DBLocker(db, opts...)
}

// DBLocker returns a Locker on the caller's SQLite database, opened with
// the "sqlite" driver (modernc.org/sqlite), creating the lease table if
// needed. The caller keeps ownership of db: Locker.Close does not close
// it. For several processes to share the file, give db what New gives its
// own: a busy timeout and WAL mode (_pragma=busy_timeout(5000) and
// _pragma=journal_mode(WAL)), write transactions that lock at BEGIN
// (_txlock=immediate; without it ForceRelease can fail with SQLITE_BUSY
// under concurrent writes), and SetMaxOpenConns(1), which keeps this
// process's writers queued in Go rather than sleeping on the file lock.
func (c Config) DBLocker(db *sql.DB, opts ...dlock.Option) (*dlock.Locker, error) {
	d, err := c.dbDriver(db)
	if err != nil {
		return nil, err
	}
	return newLocker(d, opts)
}

// DBDriver returns the bare driver on the caller's database (see
// DBLocker); closing it leaves db open.
func (c Config) DBDriver(db *sql.DB) (driver.Driver, error) {
	d, err := c.dbDriver(db)
	if err != nil {
		return nil, err
	}
	return d, nil
}

func (c Config) dbDriver(db *sql.DB) (*fileDriver, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: nil *sql.DB", dlock.ErrInvalidArgument)
	}
	if c.Sync != "" {
		return nil, fmt.Errorf("%w: filelock: Config.Sync %q does not apply to a caller's *sql.DB (set _pragma=synchronous(...) in its DSN)", dlock.ErrInvalidArgument, c.Sync)
	}
	c, err := c.resolve()
	if err != nil {
		return nil, err
	}
	s, err := newStore(context.Background(), db, nil, false, c.Retention)
	if err != nil {
		return nil, fmt.Errorf("filelock: prepare lease table: %w", err)
	}
	return &fileDriver{store: s, release: s.close}, nil
}

// newLocker wraps d in a Locker, closing d if the options are invalid.
func newLocker(d *fileDriver, opts []dlock.Option) (*dlock.Locker, error) {
	l, err := dlock.NewLocker(d, opts...)
	if err != nil {
		_ = d.Close()
	}
	return l, err
}

// resolve validates c and fills in the defaults.
func (c Config) resolve() (Config, error) {
	switch c.Sync {
	case "":
		c.Sync = SyncNormal
	case SyncNormal, SyncFull:
	default:
		return c, fmt.Errorf("%w: filelock: Sync %q: want %q or %q", dlock.ErrInvalidArgument, c.Sync, SyncNormal, SyncFull)
	}
	if c.Retention < 0 {
		return c, fmt.Errorf("%w: filelock: Retention %s is negative (0 means %s)", dlock.ErrInvalidArgument, c.Retention, DefaultRetention)
	}
	c.Retention = cmp.Or(c.Retention, DefaultRetention)
	return c, nil
}

func checkPath(path string) error {
	switch {
	case path == "":
		return fmt.Errorf(`%w: lock database path "" is empty (want an absolute file name)`, dlock.ErrInvalidArgument)
	case !filepath.IsAbs(path):
		return fmt.Errorf("%w: lock database path %q is not absolute", dlock.ErrInvalidArgument, path)
	case path[len(path)-1] == '/':
		return fmt.Errorf("%w: lock database path %q names a directory, not a file", dlock.ErrInvalidArgument, path)
	}
	return nil
}
