package filelock

import (
	"context"
	"database/sql"
)

// nowMS is the host clock in Unix milliseconds, read by SQLite itself once
// per statement: every expiry is computed and compared by the same clock.
const nowMS = `CAST(unixepoch('subsec')*1000 AS INTEGER)`

// The lease table keeps a row per name locked within the retention:
// release only clears the holder (and stamps expires_at with the time of
// release), so the fence keeps growing across holders; prune.go deletes
// the rows of names nobody has held for longer. freed is a global release
// sequence (the largest plus one at each release), indexed so that the
// release watcher finds the names freed since it last looked.
//
// dlock_evictions records force-releases for the eviction watchers of
// every process (evictions.go); seq never goes back (AUTOINCREMENT), even
// once old records are deleted.
//
// dlock_runs is the run ledger (ledger.go): a row per recorded slot of a
// name (times in Unix nanoseconds, ended 0 without an outcome), the
// newest slots of each name only; dlock_run_fences holds the highest fence
// each name's ledger has been written with, which fences its writes.
//
// dlock_fence_floor has one row: the highest fence of any pruned row. A
// name's new row starts at the floor plus one, so a name's fences strictly
// increase across the deletion of its row.
var schema = []string{
	`CREATE TABLE IF NOT EXISTS dlock_leases (
		name       TEXT PRIMARY KEY,
		token      TEXT,
		owner      TEXT NOT NULL DEFAULT '',
		fence      INTEGER NOT NULL,
		expires_at INTEGER NOT NULL,
		freed      INTEGER NOT NULL DEFAULT 0
	) WITHOUT ROWID`,
	`CREATE INDEX IF NOT EXISTS dlock_leases_freed ON dlock_leases (freed)`,
	`CREATE TABLE IF NOT EXISTS dlock_fence_floor (
		id    INTEGER PRIMARY KEY CHECK (id = 1),
		fence INTEGER NOT NULL
	)`,
	`INSERT OR IGNORE INTO dlock_fence_floor (id, fence) VALUES (1, 0)`,
	`CREATE TABLE IF NOT EXISTS dlock_evictions (
		seq   INTEGER PRIMARY KEY AUTOINCREMENT,
		name  TEXT NOT NULL,
		fence INTEGER NOT NULL,
		at    INTEGER NOT NULL
	)`,
	`CREATE TABLE IF NOT EXISTS dlock_runs (
		name     TEXT NOT NULL,
		slot     INTEGER NOT NULL,
		schedule TEXT NOT NULL,
		owner    TEXT NOT NULL,
		fence    INTEGER NOT NULL,
		attempt  INTEGER NOT NULL,
		started  INTEGER NOT NULL,
		ended    INTEGER NOT NULL DEFAULT 0,
		status   TEXT NOT NULL DEFAULT '',
		PRIMARY KEY (name, slot)
	) WITHOUT ROWID`,
	`CREATE TABLE IF NOT EXISTS dlock_run_fences (
		name  TEXT PRIMARY KEY,
		fence INTEGER NOT NULL
	) WITHOUT ROWID`,
}

// newFence is the fence of a name's new row: above every pruned row's.
const newFence = `(SELECT fence + 1 FROM dlock_fence_floor WHERE id = 1)`

// migrate creates the schema; it is idempotent and safe to run from many
// processes at once. The statements run in one BEGIN IMMEDIATE
// transaction: it waits (busy timeout) for the write lock up front. Run
// one by one, the INSERT would read a snapshot and then upgrade to a
// write, which in WAL mode fails at once with SQLITE_BUSY when another
// process wrote in between (the busy handler is not called for that).
func migrate(ctx context.Context, db *sql.DB) (err error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_, _ = conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
		}
	}()
	for _, stmt := range schema {
		if _, err := conn.ExecContext(ctx, stmt); err != nil {
			return err
		}
	}
	_, err = conn.ExecContext(ctx, "COMMIT")
	return err
}
