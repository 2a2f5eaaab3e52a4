package filelock

import (
	"context"
	"database/sql"
)

// nowMS is the host clock in Unix milliseconds, read by SQLite itself once
// per statement: every expiry is computed and compared by the same clock.
const nowMS = `CAST(unixepoch('subsec')*1000 AS INTEGER)`

// The lease table keeps a row per name that was ever locked: release only
// clears the holder, so the fence keeps growing across holders. freed is a
// global release sequence (the largest plus one at each release), indexed
// so that the release watcher finds the names freed since it last looked.
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
}

// migrate creates the schema; it is idempotent and safe to run from many
// processes at once (each statement waits for the write lock).
func migrate(ctx context.Context, db *sql.DB) error {
	for _, stmt := range schema {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return err
		}
	}
	return nil
}
