// Package sqlitefence applies the fencing rule of package fence to SQLite
// through database/sql (tested with modernc.org/sqlite, driver "sqlite").
//
// [Table.Update] and [Table.Upsert] write a row in one statement whose
// WHERE clause carries the rule; [InstallTrigger] makes SQLite itself
// abort any UPDATE that would lower a row's fence. Rejections match
// fence.ErrStale, exactly as with pgfence.
//
// # Fencing tokens
//
// Equal fences are accepted: one grant may write many times (package
// fence explains why "last_fence < :fence" is wrong).
//
// # Guarantees
//
// SQLite serialises writers on the database file, so the check and the
// write in one statement are atomic across processes sharing the file.
// Set a busy timeout (DSN "?_pragma=busy_timeout(5000)") so concurrent
// writers wait for the file lock instead of failing with SQLITE_BUSY.
package sqlitefence
