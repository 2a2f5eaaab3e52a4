// Package fence is the resource side of fencing tokens: the check that
// makes a distributed lock safe when its holder is paused.
//
// A lock with a TTL can expire while its holder is stopped (GC pause, CPU
// throttling, SIGSTOP) and still believes it holds it. The lock service
// cannot stop that holder's late write; only the resource it writes to
// can. Every grant of a dlock lease carries a fence (Lease.Fence) that is
// strictly greater than every earlier grant's fence for the same name. The
// resource remembers, per key, the highest fence it has accepted and
// rejects any write whose fence is lower:
//
//	offered <  current  rejected: ErrStale (a *StaleError says both values)
//	offered == current  accepted: the same grant writing again
//	offered >  current  accepted: a newer grant; current becomes offered
//
// # Why equal is accepted
//
// The textbook fenced write is
//
//	UPDATE resource SET value = :v, last_fence = :fence
//	WHERE id = :id AND last_fence < :fence
//
// With a strict "<" a holder can write exactly once per grant: its second
// write carries the same fence, finds last_fence equal and is rejected,
// although no other holder exists. A job that updates a row in batches, or
// retries a write whose reply was lost, would fence itself off. The rule
// here is "<=": a fence is stale only when a NEWER grant has written. Two
// holders can never share a fence (every grant increments it), so
// accepting equal fences admits nobody but the current grant.
//
// # Guards
//
// This package holds the rule ([Check]), the error ([ErrStale],
// [StaleError]) and an in-memory [Guard] for tests and single-process
// resources. The backends live in sub-packages, each applying the rule
// atomically in the store itself:
//
//   - fence/pgfence: fenced UPDATE/UPSERT in one statement (inside the
//     caller's pgx transaction or pool) and an opt-in trigger that fences
//     every UPDATE of a table, even one that forgets the WHERE clause;
//   - fence/redisfence: a Lua script that writes a value only if its fence
//     is not lower than the one stored beside it;
//   - fence/sqlitefence: the same for database/sql on SQLite;
//   - fence/mysqlfence: the fenced UPDATE/UPSERT and the trigger for
//     MySQL and MariaDB (database/sql).
//
// A fence only protects writes that carry it. A resource that also takes
// unfenced writes (another service, a manual UPDATE) is not protected
// against them; the Postgres trigger narrows that gap for one table.
package fence
