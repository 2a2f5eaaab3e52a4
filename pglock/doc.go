// Package pglock is the PostgreSQL driver for dlock, in two modes: a lease
// table (the default) and session advisory locks.
//
//	pool, _ := pgxpool.New(ctx, "postgres://app@db/app")
//	locker, err := pglock.New(pool)            // lease mode
//	locker, err := pglock.NewAdvisory(pool)    // advisory mode
//	err = locker.Migrate(ctx)                  // once per mode: creates the schema
//
// or, from a URL: dlock.Open(ctx, "postgres://app@db/app?mode=advisory")
// with this package imported. Config selects the mode and table when the
// pool is the caller's; the caller's pool is never closed by the Locker.
// Each mode has its own schema, created by Migrate (or `dlock migrate
// --url ...?mode=...`), idempotently; without it every call fails at once
// with a *SchemaError naming the fix and the mode (a permanent error, see
// below).
//
// # Lease mode
//
// One row per name (name, token, owner, fence, expires_at, the queue of
// waiters, the waiter the lock was last handed to, the last released
// tokens). One statement grants the lock if the name is free
// or its lease has expired by the database clock, or else returns the
// holder under the row lock: a loser always learns who holds the lock.
// Refresh and release are one token-checked statement each. The tries,
// waiters' attempts and plain releases that several goroutines of one
// Locker make at the same moment share one statement, each item decided as alone (see
// docs/postgres.md, "Calls of many goroutines share a statement"). Waiters
// queue in the row (driver.Queuer), in arrival order, and a release with
// waiters, of a name its Locker saw contended in the last 10 seconds,
// hands the lock to the head of the queue in its own statement:
// the row becomes the waiter's (its token and owner, a new fence) for one
// second, a provisional grant (driver.Grant.Window) that the waiter's
// first refresh extends to its TTL, and the waiter is told with NOTIFY,
// its grant in the payload: it goes ahead with no statement of its own.
// A waiter that died while it queued holds the lock for that second, not
// a TTL; the waiters behind it try again when it runs out. A queue entry
// carries the database time at which its waiter's wait ends, and a head
// whose wait has ended is not handed the lock.
//
// The NOTIFY goes to the wake channel of the Locker that queued the
// waiter: each Locker LISTENs on a channel of its own ("dlock_wake_" and
// 16 random hex digits) on one dedicated connection, taken out of the
// pool on the first wait, so the server sees one connection more than
// pool_max_conns, and one Locker's connection hears a hand-off, not
// every waiting Locker's. A release notifies only when someone queues.
// Waiters also retry when the holder's lease runs out, and every 250 ms
// should a notification be lost (the listening connection is re-opened
// on the next wait); a waiter finding the lock already its own takes it.
//
// A waiter that gives up (its wait ended) leaves the queue when the
// portable layer releases its token; a lock handed to it just then goes
// on to the next waiter, as at any release. Some releases reserve the
// lock for the head instead of handing it over: the release of a name
// the Locker did not see contended lately (deciding a hand-off costs a
// lock nobody waits for), a batch release, the release of a token whose
// stalled attempt took the lock, and any release whose head's wait has
// ended or was queued by an earlier version (a bare token). The
// lock is then kept 50 ms for that waiter, which is woken to take it:
// another waiter arriving then queues behind instead of taking it
// (TryAcquire is not held back), and a reserved waiter that does not come
// loses its turn after 50 ms, when the waiters queued behind it retry.
// An earlier version's waiters are woken on a channel named after the
// table, on which every Locker still listens.
//
// A released name's row stays as a tombstone that remembers the last
// eight tokens released on it, so that an attempt the server runs after
// its caller gave up (server stalled, context over, server resumed)
// grants nothing: the portable layer releases an abandoned attempt's
// token, and whichever of that release and the stalled grant runs first,
// no lease is left that nobody holds. Tombstones older than ten minutes
// are deleted (by a Release, at most once a minute per Locker): rows do
// not accumulate per name. An attempt stalled longer than that can still
// leave a lease nobody holds, until its TTL.
//
// # Advisory mode
//
// pg_try_advisory_lock on a connection taken from the pool and pinned for
// the life of the lease; Release unlocks and returns it. A grant is one
// statement: the try and, only when it succeeded, nextval of the fence
// sequence. Waiters (driver.Queuer) block in the server in
// pg_advisory_lock on their own connection, which the server grants in
// turn as each holder unlocks: no polling, no NOTIFY; the end of the
// caller's context cancels the statement and closes the connection. Each
// holder describes itself (name, owner, fence) in an UNLOGGED table of
// holders, one row per backend, written by a goroutine once the lease has
// lived 50 ms (a shorter lease never pays for it): a loser, Inspect, List
// and ForceRelease read it, joined with pg_locks, and a holder younger
// than that is named by its backend pid. The same goroutine then reads the
// idle pinned connection, so that its loss (a server crash or restart, a
// terminated backend) is known when the socket closes: the next Refresh
// fails at once with driver.ErrSessionEnded, without a round trip.
//
// There is no TTL to tune: the lease ends when the session ends, and the
// TTL only sets how often (TTL/3) the pinned session is health-checked
// (same backend pid, key still in pg_locks). Every held lease occupies
// one pool connection: size pool_max_conns for the leases held at once
// plus the attempts in flight, or TryAcquire waits for a free connection
// (and that wait, like dialing a new connection, counts against the first
// lease's TTL: keep pool_min_conns warm for short TTLs). Lock names map
// to advisory keys by Key (SHA-256, with the collision odds documented
// there); a name "pg_advisory:N" uses key N itself, so dlock
// interoperates with code calling pg_advisory_lock(N).
//
// # Force-release
//
// ForceRelease (Locker.ForceRelease, `dlock release --force`) evicts
// whoever holds a lock and draws a new fence: in lease mode one statement
// frees the row; in advisory mode one statement terminates the holder's
// backend (pg_terminate_backend, waiting for it to exit; it needs the
// right to signal it: the same role or pg_signal_backend). The same
// transaction announces the eviction with NOTIFY on the channel T_evicted
// (T the table or prefix, without its schema), payload "FENCE NAME" (the
// evicted grant's fence, a space, its name), so the notice is delivered
// only if the eviction committed. Both modes implement
// driver.EvictionWatcher: a Locker holding leases LISTENs on that channel
// on its one listening connection (the one lease-mode waiters use; in
// advisory mode it is opened for this alone, one connection more than the
// pool's), and the evicted holder's lease ends at once, Lease.Done closed
// with dlock.LostForceReleased, instead of at its next refresh.
//
// In advisory mode the holder sees its connection close just before the
// notice arrives, so a pinned session terminated "by administrator
// command" (SQLSTATE 57P01) waits up to one second for the notice before
// it reports its session lost; a pg_terminate_backend from elsewhere thus
// reaches the holder (as dlock.LostSession) up to one second later, or at
// its next health check if that comes first. Delivery is best effort: a
// Locker whose listening connection fails, or which falls 64 evictions
// behind, learns at its next refresh (lease mode: its lease is gone;
// advisory mode: its session is). Tables of the same name in different
// schemas share the channel; a notice ends only a lease of that name and
// fence, but give such tables different names.
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
//	       prefix of its objects (default dlock_fences): [a-z_][a-z0-9_]*,
//	       at most 55 bytes, optionally schema-qualified
//
// plus dlock's own ttl, wait and owner (see dlock.Open). Other keys are
// pgx's or the server's (sslmode, pool_max_conns, application_name, ...);
// an unknown key starting with "dlock" is rejected. Opening pings the
// server, so a wrong host or password fails at Open, with the password
// never in the error.
//
// The objects, for table T: lease mode, the table T and the sequence
// T_seq; advisory mode, the sequence T_seq and the unlogged table
// T_holders; in both, the run ledger's tables T_runs and T_ledgers.
//
// # Run ledger
//
// Both modes implement driver.Ledger (Locker.RunOnce, `dlock run
// --once-per`): T_runs holds a row per recorded slot of a name, T_ledgers
// the highest fence each name's ledger was written with. Each call is one
// statement, fenced by T_ledgers' row of the name (locked by the write,
// so the writes to one name's ledger run one at a time) and decided on
// the slot row's latest version under its lock, so two callers never
// both claim a slot. Slots are kept to the microsecond: a slot with a
// fraction of one is refused (dlock.ErrInvalidArgument). A schema
// migrated before the run ledger existed keeps its locks working, and its
// ledger calls fail with the *SchemaError that names the fix.
//
// # Fencing tokens
//
// In both modes the fence is nextval of the mode's sequence, drawn in the
// statement that grants the lock: one global strictly increasing counter,
// which is a valid fence for every name (a resource only needs each grant
// of its name to exceed the earlier ones). In lease mode a grant's fence
// also exceeds the one its name's row carries when the grant locks it: an
// attempt draws its fence as it starts, and one that waited for the row
// while another grant drew a higher fence and was released draws again,
// so the order of the fences is the order of the grants. Fence state is one sequence,
// whatever the number of names. ForceRelease draws a fence too, so the
// evicted holder's fenced writes fail and the next grant's fence exceeds
// it.
//
// Crashes: a sequence writes WAL once per 32 values, logging 32 values
// ahead, and crash recovery resumes past the logged value. In lease mode
// the grant commits a row, so its commit flushes the sequence's record:
// a fence handed out survives a crash. An advisory grant commits nothing,
// and PostgreSQL may hand out a pre-logged value before the session that
// logged it has flushed the record: a crash in that window would lose up
// to 32 values per such session. pglock therefore advances the sequence
// by 32 × (max_connections + 64) on every connection before its first
// grant, committed and flushed; every connection after a crash is new, so
// every grant after a crash draws above anything the crash could have
// lost. TestCrashFencesNeverGoBack kills the postmaster and every backend
// with SIGKILL mid-run, three times per mode, and checks that every later
// fence exceeds every earlier one. Neither argument holds with
// synchronous_commit=off (a crash loses the last commits, lease grants
// included) or fsync=off (an OS crash loses what was not flushed):
// Diagnose reports both as unsafe.
//
// Upgrading from the per-name fence tables of earlier versions: Migrate
// creates the sequence above the highest fence in the old table, so no
// fence goes backwards across the upgrade, and (advisory mode) drops the
// old fence table, so that a client of the old version still running
// fails loudly instead of granting fences from a counter that no longer
// rises. In lease mode an old client would still run: stop old clients
// before migrating. Dropping or resetting the sequence restarts fences:
// don't.
//
// # Guarantees
//
// PostgreSQL is strongly consistent: a grant is one statement on the
// primary, and no two live leases of a name can exist on one server.
// Both modes are fit for correctness locks when writes are fenced, with
// synchronous_commit on and fsync on.
//
// Lease mode counts time on the database clock only (clock_timestamp()),
// so client clocks do not matter; the holder's own conservative deadline
// (Lease.Expires) runs on its monotonic clock from when it sent the
// request. A paused holder can outlive its lease, as with any TTL lock:
// fence your writes. Leases survive a server restart (the table is
// durable). On failover to an asynchronous replica, grants not yet
// replicated are lost: the lock can be granted twice and a fence reused.
// Use synchronous replication when that matters (Diagnose warns of
// asynchronous standbys).
//
// Advisory mode is session-bound: a crashed holder's lock is freed as soon
// as the server notices its connection is gone (at once on a clean close
// or a killed process; after TCP keepalive for a vanished host), and a
// restart or failover ends every session and with it every lock: a holder
// whose lease has lived 50 ms knows of it when its socket closes (its
// next Refresh fails without a round trip), a younger one at its next
// health check, TTL/3 at most; it must stop. (The driver implements
// driver.SessionWatcher, so Lease.Done closes then, with
// dlock.LostSession.) A transaction-pooling proxy
// (PgBouncer pool_mode=transaction or statement) silently breaks session
// locks: the lock stays on a server backend that then serves other
// clients. pglock detects a proxy by comparing the backend pid reported
// by the server with the one the connection announced, and then refuses a
// grant whose backend changes between two statements
// (ErrTransactionPooling); a pooler that happens to give the same backend
// twice is caught by the pid check at the next health check instead, and
// by Diagnose. Connect directly or through session pooling.
//
// Errors are never contention. A Grant that says "held" is returned only
// when the server said so (pg_try_advisory_lock false, or the lease row
// held by another live token); any failure, including of the holder
// look-up, is an error. Errors that retrying cannot cure are marked
// driver.Permanent, so that a wait fails at once instead of running out:
// a missing schema (SQLSTATE 42P01, 42703, 3F000, 42883, as a
// *SchemaError that names the fix), failed authentication (28P01, 28000),
// a database that does not exist (3D000), a permission denied (42501).
//
// Diagnose (`dlock doctor`) checks for a pooling proxy in front,
// synchronous_commit, fsync, asynchronous standbys and the mode's schema.
package pglock
