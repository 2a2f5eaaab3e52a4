// Package pgfence applies the fencing rule of package fence inside
// PostgreSQL (pgx v5).
//
// Two ways, usable together:
//
//   - [Table.Update] and [Table.Upsert] write a row in ONE statement whose
//     WHERE clause carries the rule (fence column <= offered fence), so the
//     check and the write cannot be separated by another writer. They take
//     a [Querier], which *pgx.Conn, *pgxpool.Pool and pgx.Tx all satisfy:
//     call them inside your own transaction to fence a write that belongs
//     with others.
//   - [InstallTrigger] adds a BEFORE UPDATE trigger to a table that raises
//     SQLSTATE [SQLState] whenever an UPDATE would lower the fence column.
//     Code that forgets the fenced WHERE clause (a raw UPDATE from another
//     service, a script) is then still rejected. [MapError] turns that
//     exception into a *fence.StaleError.
//
// A rejected write returns an error matching fence.ErrStale. Inside a
// transaction, a rejection by the trigger aborts the transaction (it is an
// exception); a rejection by Update/Upsert does not (it is a WHERE clause
// that matched nothing), so the caller decides whether to roll back.
//
// # Fencing tokens
//
// Equal fences are accepted: one grant may write many times. The often
// quoted "WHERE last_fence < :fence" would reject a holder's second write under
// the same grant; see package fence.
//
// # Guarantees
//
// Under READ COMMITTED, a concurrent UPDATE of the same row makes Postgres
// re-check the WHERE clause against the newest row version, so a write
// with a lower fence never lands after a higher one committed. Under
// REPEATABLE READ or SERIALIZABLE the losing writer gets a serialization
// failure (SQLSTATE 40001) instead, returned unchanged. The trigger cannot
// see whether an UPDATE set the fence column: an UPDATE that leaves it out
// keeps the current fence and passes. It fences stale writers, not
// unfenced ones.
package pgfence
