package filelock

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"time"

	_ "modernc.org/sqlite" // registers the pure-Go "sqlite" database/sql driver
)

// fileDriver is the driver.Driver: a handle on a store. Every Locker on
// one file in a process shares one store (see shared.go), so that their
// write transactions queue for one connection in Go rather than sleep in
// SQLite's busy handler on the file lock, and one release watcher serves
// them all.
type fileDriver struct {
	*store
	cfg      Config // resolved; the zero Config on a caller's *sql.DB
	once     sync.Once
	closeErr error
	release  func() error
}

// Close drops the handle; the store closes with its last handle.
func (d *fileDriver) Close() error {
	d.once.Do(func() { d.closeErr = d.release() })
	return d.closeErr
}

// store is one database: its connection pool, prepared statements and
// release watcher.
type store struct {
	db      *sql.DB
	owned   bool // opened by this package, closed with the store
	stmts   statements
	watch   *watcher
	flights flights
	prune   pruner
	refs    int // handles, when shared; guarded by shared.mu
}

// statements are prepared once: parsing the SQL costs more than running it.
type statements struct {
	peek, grant, holder, refresh, release, state, adopt *sql.Stmt
}

func (s *statements) all() []**sql.Stmt {
	return []**sql.Stmt{&s.peek, &s.grant, &s.holder, &s.refresh, &s.release, &s.state, &s.adopt}
}

var queries = []string{peekSQL, grantSQL, holderSQL, refreshSQL, releaseSQL, stateSQL, adoptSQL}

// newStore creates the schema in db and prepares the statements; rows of
// names not held are pruned after retention. openPoll
// opens the watcher's own connection; nil polls through db itself (a
// caller's pool, whose size we do not know).
func newStore(ctx context.Context, db *sql.DB, openPoll func() (*sql.DB, error), owned bool, retention time.Duration) (*store, error) {
	if err := migrate(ctx, db); err != nil {
		return nil, err
	}
	s := &store{db: db, owned: owned, watch: newWatcher(db, openPoll), prune: newPruner(retention)}
	for i, p := range s.stmts.all() {
		var err error
		if *p, err = db.PrepareContext(ctx, queries[i]); err != nil {
			return nil, errors.Join(err, s.closeStmts())
		}
	}
	return s, nil
}

func (s *store) closeStmts() error {
	var errs []error
	for _, p := range s.stmts.all() {
		if *p != nil {
			errs = append(errs, (*p).Close())
		}
	}
	return errors.Join(errs...)
}

// close stops the release watcher, frees the statements and closes the
// database if this package opened it.
func (s *store) close() error {
	err := errors.Join(s.watch.close(), s.closeStmts())
	if s.owned {
		err = errors.Join(err, s.db.Close())
	}
	return err
}
