package baseline

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/filelock"
)

// Statements of the hand-written SQLite lock.
const (
	fileSchema = `CREATE TABLE IF NOT EXISTS dlock_bench_lease (name TEXT PRIMARY KEY, token TEXT NOT NULL, expires_at INTEGER NOT NULL)`
	fileTake   = `INSERT OR IGNORE INTO dlock_bench_lease (name, token, expires_at) VALUES (?, ?, ?)`
	fileDrop   = `DELETE FROM dlock_bench_lease WHERE name = ? AND token = ?`
)

// openFile compares filelock with a raw INSERT OR IGNORE / DELETE on the
// same file, opened as filelock opens it. The file is embedded: there are
// no round trips to count and no server.
func openFile(ctx context.Context, u *url.URL, opts []dlock.Option) (*Target, error) {
	sync := cmp.Or(u.Query().Get("sync"), filelock.SyncNormal)
	t := &Target{Backend: "file",
		Baseline: "SQLite INSERT OR IGNORE + token-checked DELETE, same file and pragmas"}
	t.NewLocker = func(o ...dlock.Option) (*dlock.Locker, error) {
		return dlock.Open(ctx, u.String(), append(opts, o...)...)
	}
	var err error
	if t.Dlock, err = t.dlockSide(func() (*dlock.Locker, error) { return t.NewLocker() }, nil); err != nil {
		return nil, err
	}
	db, err := sql.Open("sqlite", fileDSN(u.Path, sync))
	if err != nil {
		t.Close()
		return nil, err
	}
	t.onClose(func() { _ = db.Close() })
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, fileSchema); err != nil {
		t.Close()
		return nil, fmt.Errorf("create the baseline's table: %w", err)
	}
	mk := tokenAttempts(sqliteLock{db})
	t.Base = Side{Cycle: cycleOf(mk), Contenders: polls(shared(mk))}
	return t, nil
}

// fileDSN is the SQLite URI filelock uses: WAL, the sync level, a busy
// timeout, write transactions that lock at BEGIN.
func fileDSN(path, sync string) string {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", filelock.BusyTimeout))
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous("+sync+")")
	q.Set("_txlock", "immediate")
	return (&url.URL{Scheme: "file", Path: path, RawQuery: q.Encode()}).String()
}

// sqliteLock is the hand-written SQLite lock.
type sqliteLock struct{ db *sql.DB }

func (f sqliteLock) try(ctx context.Context, name, tok string) (bool, error) {
	res, err := f.db.ExecContext(ctx, fileTake, name, tok, time.Now().Add(time.Minute).UnixMilli())
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

func (f sqliteLock) drop(ctx context.Context, name, tok string) error {
	_, err := f.db.ExecContext(ctx, fileDrop, name, tok)
	return err
}
