package filelock

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"path/filepath"
	"slices"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/driver"
	_ "modernc.org/sqlite" // registers the pure-Go "sqlite" database/sql driver
)

// Scheme is the URL scheme this package registers with dlock.Open.
const Scheme = "file"

// BusyTimeout is how long one statement waits for another process's write
// transaction to finish before failing with SQLITE_BUSY. Transactions here
// last microseconds, so reaching it means a stuck process.
const BusyTimeout = 5000 // milliseconds

func init() {
	dlock.Register(Scheme, func(ctx context.Context, rawURL string) (driver.Driver, error) {
		path, sync, err := parseURL(rawURL)
		if err != nil {
			return nil, err
		}
		return openDriver(ctx, path, sync)
	})
}

// Open opens (creating if needed) the lock database at path, an absolute
// file name, and returns a Locker on it. Missing parent directories are
// created with mode 0700. Commits are synced as with sync=normal (see the
// package doc; dlock.Open with a file URL can ask for sync=full). opts
// become the Locker's defaults.
func Open(path string, opts ...dlock.Option) (*dlock.Locker, error) {
	if err := checkPath(path); err != nil {
		return nil, err
	}
	d, err := openDriver(context.Background(), path, SyncNormal)
	if err != nil {
		return nil, fmt.Errorf("filelock: open %s: %w", path, err)
	}
	return locker(d, opts)
}

// New returns a Locker on the caller's SQLite database, opened with the
// "sqlite" driver (modernc.org/sqlite), creating the lease table if needed.
// The caller keeps ownership of db: Locker.Close does not close it. For
// several processes to share the file, give db what Open gives its own:
// a busy timeout and WAL mode (_pragma=busy_timeout(5000) and
// _pragma=journal_mode(WAL)), write transactions that lock at BEGIN
// (_txlock=immediate; without it ForceRelease can fail with SQLITE_BUSY
// under concurrent writes), and SetMaxOpenConns(1), which keeps this
// process's writers queued in Go rather than sleeping on the file lock.
func New(db *sql.DB, opts ...dlock.Option) (*dlock.Locker, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: nil *sql.DB", dlock.ErrInvalidArgument)
	}
	s, err := newStore(context.Background(), db, nil, false)
	if err != nil {
		return nil, fmt.Errorf("filelock: prepare lease table: %w", err)
	}
	return locker(&fileDriver{store: s, release: s.close}, opts)
}

func locker(d *fileDriver, opts []dlock.Option) (*dlock.Locker, error) {
	l, err := dlock.NewLocker(d, opts...)
	if err != nil {
		_ = d.Close()
	}
	return l, err
}

// Values of the sync URL query key.
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

// parseURL accepts file:///abs/path (or file://localhost/abs/path) and the
// query key sync.
func parseURL(rawURL string) (path, sync string, err error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", "", fmt.Errorf("%w: malformed file URL %q", dlock.ErrInvalidArgument, rawURL)
	}
	if u.Scheme != Scheme || u.Opaque != "" || (u.Host != "" && u.Host != "localhost") {
		return "", "", fmt.Errorf("%w: file URL %q: want file:///absolute/path/to/dlock.db", dlock.ErrInvalidArgument, rawURL)
	}
	q := u.Query()
	sync = cmp.Or(q.Get("sync"), SyncNormal)
	q.Del("sync")
	for _, k := range slices.Sorted(maps.Keys(q)) {
		return "", "", fmt.Errorf("%w: file URL %q: unknown query key %q (want sync, ttl, wait or owner)", dlock.ErrInvalidArgument, rawURL, k)
	}
	if sync != SyncNormal && sync != SyncFull {
		return "", "", fmt.Errorf("%w: file URL %q: sync=%q: want %s or %s", dlock.ErrInvalidArgument, rawURL, sync, SyncNormal, SyncFull)
	}
	if err := checkPath(u.Path); err != nil {
		return "", "", fmt.Errorf("file URL %q: %w", rawURL, err)
	}
	return u.Path, sync, nil
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

// openDB opens one connection to path: this process's writers queue for it
// in Go (fast hand-off), and only other processes meet the file lock, where
// the busy timeout makes SQLite wait for it.
func openDB(path, sync string) (*sql.DB, error) {
	db, err := sql.Open("sqlite", dsn(path, sync))
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	if err := db.Ping(); err != nil {
		return nil, errors.Join(err, db.Close())
	}
	return db, nil
}

// dsn is a SQLite URI: WAL so that readers never block the writer, the
// sync level, a busy timeout, and write transactions that take the write
// lock at BEGIN (no deadlock-prone lock upgrades).
func dsn(path, sync string) string {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", BusyTimeout))
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous("+sync+")")
	q.Set("_txlock", "immediate")
	return (&url.URL{Scheme: "file", Path: path, RawQuery: q.Encode()}).String()
}
