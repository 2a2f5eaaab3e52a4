package filelock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// shared holds the stores opened by path in this process, one per file
// and Config, counted by handle.
var shared = struct {
	mu sync.Mutex
	m  map[string]*store
}{m: map[string]*store{}}

// openDriver returns a handle on path's shared store, opening it (and
// creating its directory) on first use; c is resolved.
func openDriver(ctx context.Context, path string, c Config) (*fileDriver, error) {
	key := filepath.Clean(path) + "?sync=" + c.Sync + "&retention=" + c.Retention.String()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	s := shared.m[key]
	if s == nil {
		var err error
		if s, err = openStore(ctx, path, c); err != nil {
			return nil, err
		}
		shared.m[key] = s
	}
	s.refs++
	return &fileDriver{store: s, cfg: c, release: func() error { return unref(key, s) }}, nil
}

func unref(key string, s *store) error {
	shared.mu.Lock()
	s.refs--
	last := s.refs == 0
	if last {
		delete(shared.m, key)
	}
	shared.mu.Unlock()
	if !last {
		return nil
	}
	return s.close()
}

func openStore(ctx context.Context, path string, c Config) (*store, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	db, err := openDB(path, c.Sync)
	if err != nil {
		return nil, err
	}
	s, err := newStore(ctx, db, func() (*sql.DB, error) { return openDB(path, c.Sync) }, true, c.Retention)
	if err != nil {
		return nil, errors.Join(err, db.Close())
	}
	return s, nil
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
	if err := connect(db); err != nil {
		return nil, errors.Join(err, db.Close())
	}
	return db, nil
}

// connect opens db's connection, which applies the DSN's pragmas. Switching
// a new file to WAL mode upgrades a shared lock to an exclusive one, and
// when two processes do that at once SQLite fails one of them with
// SQLITE_BUSY without calling the busy handler (waiting could deadlock).
// connect therefore tries again, a few milliseconds apart, for as long as
// the busy timeout would have waited.
func connect(db *sql.DB) error {
	deadline := time.Now().Add(BusyTimeout * time.Millisecond)
	for pause := time.Millisecond; ; pause = min(2*pause, 50*time.Millisecond) {
		err := db.Ping()
		if err == nil || !isBusy(err) || time.Now().Add(pause).After(deadline) {
			return err
		}
		time.Sleep(pause)
	}
}

// isBusy reports whether err is SQLite's SQLITE_BUSY (any extended code).
func isBusy(err error) bool {
	var e *sqlite.Error
	return errors.As(err, &e) && e.Code()&0xff == sqlite3.SQLITE_BUSY
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
