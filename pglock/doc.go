// Package pglock is the PostgreSQL driver for dlock, in two modes: a lease
// table (the default) and session advisory locks.
//
//	pool, _ := pgxpool.New(ctx, "postgres://app@db/app")
//	locker, err := pglock.New(pool)            // lease mode
//	locker, err := pglock.NewAdvisory(pool)    // advisory mode
//	err = locker.Migrate(ctx)                  // once: creates the table
//
// or, from a URL: dlock.Open(ctx, "postgres://app@db/app?mode=advisory")
// with this package imported. Config selects the mode and table when the
// pool is the caller's; the caller's pool is never closed by the Locker.
//
// Lease mode keeps one row per name (name, token, owner, fence,
// expires_at). One statement grants the lock if the name is free or its
// lease has expired by the database clock, bumping and returning the fence,
// or else returns the holder; refresh and release are one token-checked
// statement each; release notifies waiters with NOTIFY on a channel named
// after the table, and each Locker LISTENs on one dedicated connection
// shared by all its waiters (taken out of the pool on the first wait, so
// the server sees one connection more than pool_max_conns; waiters poll
// with backoff as a fallback, and while that connection is re-opened). It
// scales to millions of names without holding a connection per lease.
// Migrate (or `dlock migrate`) creates the table, idempotently.
//
// Advisory mode holds pg_try_advisory_lock on a connection taken from the
// pool and pinned for the life of the lease; Release unlocks and returns
// it. There is no TTL to tune: the lease ends when the session ends, and
// the TTL only sets how often (TTL/3) the pinned session is health-checked
// (same backend pid, key still in pg_locks); a failed check, or the loss of
// the connection, closes the lease's Done. Every held lease occupies one
// pool connection: size pool_max_conns for the leases held at once plus
// the attempts in flight, or TryAcquire waits for a free connection (and
// that wait, like dialing a new connection, counts against the first
// lease's TTL: keep pool_min_conns warm for short TTLs). Lock
// names map to advisory keys by Key (SHA-256, with the collision odds
// documented there); a name "pg_advisory:N" uses key N itself, so dlock
// interoperates with code calling pg_advisory_lock(N).
//
// # URLs
//
//	postgres://user:password@host:5432/db?sslmode=disable
//	postgresql://user@host/db?mode=advisory&pool_max_conns=50
//	postgres://user@host/db?table=locks.leases
//
// The URL goes to pgxpool.ParseConfig unchanged except for this package's
// keys, which are removed first:
//
//	mode   lease (default) or advisory
//	table  the lease table (default dlock_leases) or, in advisory mode, the
//	       fence table (default dlock_fences): [a-z_][a-z0-9_]*, optionally
//	       schema-qualified
//
// plus dlock's own ttl, wait and owner (see dlock.Open). Other keys are
// pgx's or the server's (sslmode, pool_max_conns, application_name, ...);
// an unknown key starting with "dlock" is rejected. Opening pings the
// server, so a wrong host or password fails at Open, with the password
// never in the error.
//
// # Fencing tokens
//
// Lease mode: the fence is a column of the name's row, bumped in the
// statement that grants the lock. The row is kept when the lock is released
// (token cleared) and ForceRelease bumps it too, so fences strictly
// increase per name for the life of the table. Advisory mode: the fence is
// the name's row in the fence table, bumped in the same statement as
// pg_try_advisory_lock and only when the lock was taken. In both modes the
// grant and the bump commit together: there is no grant without its fence.
// Dropping or truncating the table restarts fences at 1, which breaks
// fencing for resources that remember older ones: don't.
//
// # Guarantees
//
// PostgreSQL is strongly consistent: a grant is one committed statement on
// the primary, and no two live leases of a name can exist on one server.
// Both modes are fit for correctness locks when writes are fenced.
//
// Lease mode counts time on the database clock only (clock_timestamp()),
// so client clocks do not matter; the holder's own conservative deadline
// (Lease.Expires) runs on its monotonic clock from when it sent the
// request. A paused holder can outlive its lease, as with any TTL lock:
// fence your writes. Locks survive a server restart (the table is durable;
// with synchronous_commit=off a crash can lose the last grants, and with
// them fences: keep it on). On failover to an asynchronous replica, grants
// not yet replicated are lost: the lock can be granted twice and a fence
// reused. Use synchronous replication (synchronous_commit=on/remote_apply
// with a synchronous standby) when that matters.
//
// Advisory mode is session-bound: a crashed holder's lock is freed as soon
// as the server notices its connection is gone (at once on a clean close
// or a killed process; after TCP keepalive for a vanished host), and a
// restart or failover ends every session and with it every lock: holders
// learn of it at their next health check, TTL/3 at most, and must stop. A
// transaction-pooling proxy (PgBouncer pool_mode=transaction or statement)
// silently breaks session locks: the lock stays on a server backend that
// then serves other clients, whose own attempts would succeed
// re-entrantly. pglock detects a proxy by comparing the backend pid
// reported by the server with the one the connection announced, and then
// refuses a grant whose backend changes between two statements
// (ErrTransactionPooling); a transaction pooler that happens to give the
// same backend twice is caught by the pid check at the next health check
// instead. Connect directly or through session pooling.
//
// Release notifications use NOTIFY, which serialises the commits of all
// notifying transactions on the server: under very high release rates
// with fsync on, this bounds throughput.
package pglock
