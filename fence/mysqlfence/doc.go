// Package mysqlfence applies the fencing rule of package fence inside
// MySQL 8 and MariaDB 10.11 (InnoDB tables, through database/sql and
// github.com/go-sql-driver/mysql).
//
// Two ways, usable together, as in pgfence:
//
//   - [Table.Update] and [Table.Upsert] write a row with a fenced UPDATE
//     whose WHERE clause carries the rule (fence column <= offered fence),
//     so the check and the write cannot be separated by another writer.
//     They take a [DB], which *sql.DB, *sql.Tx and *sql.Conn satisfy: call
//     them inside your own transaction to fence a write that belongs with
//     others.
//   - [InstallTrigger] adds a BEFORE UPDATE trigger to a table that
//     signals SQLSTATE [SQLState] whenever an UPDATE would lower the fence
//     column. Code that forgets the fenced WHERE clause (a raw UPDATE from
//     another service, a script) is then still rejected. [MapError] turns
//     that signal into a *fence.StaleError.
//
// A rejected write returns an error matching fence.ErrStale, exactly as
// with pgfence. Unlike PostgreSQL, MySQL rolls back only the failing
// statement, not the transaction, when the trigger rejects a write: in
// both forms the caller decides whether to roll back.
//
// # Fencing tokens
//
// Equal fences are accepted: one grant may write many times (package
// fence explains why "last_fence < :fence" is wrong). Fences up to
// fence.MaxSQL (2^63-1) are accepted, so the column may be BIGINT or
// BIGINT UNSIGNED; no dlock backend hands out a larger fence.
//
// # Affected rows
//
// MySQL has no RETURNING on UPDATE, and its affected-rows count is the
// number of rows CHANGED unless the DSN sets clientFoundRows=true: a
// write that repeats the stored values under the same fence changes
// nothing. So that such a write is not taken for a rejection, the fenced
// UPDATE sets the fence column through LAST_INSERT_ID(fence), which the
// server reports back only when the row matched. This works with either
// DSN setting, and it leaves LAST_INSERT_ID() of the connection set to
// the fence after a write that landed.
//
// Upsert runs the fenced UPDATE first; only when no row has the key does
// it read the row and INSERT it, repeating the UPDATE if another writer
// created the row in between. A row that exists costs one statement.
//
// # Guarantees
//
// InnoDB locks the row an UPDATE changes until the transaction ends, and
// the UPDATE reads the newest committed row even under REPEATABLE READ
// (the default), so two writers with different fences serialize and a
// lower fence never lands after a higher one committed. The read that
// explains a rejection is a locking read (LOCK IN SHARE MODE) for the
// same reason: inside a transaction it holds a shared lock on the row
// until the transaction ends. Inside a REPEATABLE READ transaction, two
// Upserts creating the same new key can deadlock (error 1213); InnoDB
// rolls one back and it should be retried, as any InnoDB deadlock.
//
// The trigger cannot see whether an UPDATE set the fence column: an
// UPDATE that leaves it out keeps the current fence and passes. It fences
// stale writers, not unfenced ones. Tables must use a transactional
// engine (InnoDB); MyISAM has no row locks.
package mysqlfence
