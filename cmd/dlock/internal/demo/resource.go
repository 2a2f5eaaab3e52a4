package demo

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"time"

	"github.com/dlockdev/dlock/fence/sqlitefence"
	_ "modernc.org/sqlite" // the demos' protected resources are SQLite files
)

// The protected resource of the demos: a SQLite file in the scenario's
// directory, shared by the worker processes. It stands for "the database
// the locked job writes to", and is separate from the lock backend.
const resourceSchema = `
CREATE TABLE IF NOT EXISTS counter (id INTEGER PRIMARY KEY, value INTEGER NOT NULL);
INSERT OR IGNORE INTO counter (id, value) VALUES (1, 0);
CREATE TABLE IF NOT EXISTS work (proc TEXT, fence INTEGER, started INTEGER, ended INTEGER);
CREATE TABLE IF NOT EXISTS register (key TEXT PRIMARY KEY, value TEXT, fence INTEGER NOT NULL DEFAULT 0);
INSERT OR IGNORE INTO register (key, value, fence) VALUES ('report', 'initial', 0);
CREATE TABLE IF NOT EXISTS writes (proc TEXT, fence INTEGER, value TEXT, accepted INTEGER, at INTEGER);
CREATE TABLE IF NOT EXISTS events (proc TEXT, what TEXT, ms INTEGER);
CREATE TABLE IF NOT EXISTS subscriptions (id INTEGER PRIMARY KEY,
	last_charged_period INTEGER NOT NULL DEFAULT 0, fence INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS charges (id INTEGER PRIMARY KEY AUTOINCREMENT, sub INTEGER, period INTEGER,
	host TEXT, idem_key TEXT UNIQUE);
`

// reportKey is the register's row that the pause scenarios write.
const reportKey = "report"

// registerTable is the fenced register of the fencing scenario.
var registerTable = sqlitefence.Table{Name: "register", Key: "key", Fence: "fence"}

// openResource opens the resource database in dir, creating its tables.
func openResource(dir string) (*sql.DB, error) {
	dsn := "file:" + filepath.Join(dir, "resource.db") +
		"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("demo resource: %w", err)
	}
	if _, err := db.Exec(resourceSchema); err != nil {
		db.Close()
		return nil, fmt.Errorf("demo resource: create tables: %w", err)
	}
	return db, nil
}

func nowMs() int64 { return time.Now().UnixMilli() }

// record adds an event row.
func record(ctx context.Context, db *sql.DB, proc, what string, ms int64) error {
	_, err := db.ExecContext(ctx, `INSERT INTO events (proc, what, ms) VALUES (?, ?, ?)`, proc, what, ms)
	return err
}

// countEvents counts events named what.
func countEvents(ctx context.Context, db *sql.DB, what string) (n int, err error) {
	err = db.QueryRowContext(ctx, `SELECT count(*) FROM events WHERE what = ?`, what).Scan(&n)
	return n, err
}

// eventMs returns the ms value of the first event named what.
func eventMs(ctx context.Context, db *sql.DB, what string) (ms int64, ok bool, err error) {
	err = db.QueryRowContext(ctx, `SELECT ms FROM events WHERE what = ? LIMIT 1`, what).Scan(&ms)
	if err == sql.ErrNoRows {
		return 0, false, nil
	}
	return ms, err == nil, err
}

// interval is one process's stretch of work under the lock.
type interval struct {
	proc           string
	fence          int64
	started, ended int64
}

func intervals(ctx context.Context, db *sql.DB) ([]interval, error) {
	rows, err := db.QueryContext(ctx, `SELECT proc, fence, started, ended FROM work ORDER BY started`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []interval
	for rows.Next() {
		var iv interval
		if err := rows.Scan(&iv.proc, &iv.fence, &iv.started, &iv.ended); err != nil {
			return nil, err
		}
		out = append(out, iv)
	}
	return out, rows.Err()
}

// overlaps reports whether any two intervals overlap.
func overlaps(ivs []interval) bool {
	var end int64
	for i, iv := range ivs {
		if i > 0 && iv.started < end {
			return true
		}
		end = max(end, iv.ended)
	}
	return false
}

// writeAttempt is one row of the writes log.
type writeAttempt struct {
	proc     string
	fence    int64
	value    string
	accepted bool
}

func writeLog(ctx context.Context, db *sql.DB) ([]writeAttempt, error) {
	rows, err := db.QueryContext(ctx, `SELECT proc, fence, value, accepted FROM writes ORDER BY at, rowid`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []writeAttempt
	for rows.Next() {
		var w writeAttempt
		if err := rows.Scan(&w.proc, &w.fence, &w.value, &w.accepted); err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	return out, rows.Err()
}

// registerValue reads the value and fence of the register's row key.
func registerValue(ctx context.Context, db *sql.DB, key string) (value string, f int64, err error) {
	err = db.QueryRowContext(ctx, `SELECT value, fence FROM register WHERE key = ?`, key).Scan(&value, &f)
	return value, f, err
}
