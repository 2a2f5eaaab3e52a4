// Package dlock is a distributed lock that tells the truth about what a
// lock can and cannot promise.
//
// A *Locker hands out *Lease values on named locks from one backend
// (Redis, Redlock, PostgreSQL, etcd, or an embedded SQLite file). Every
// lease has a random 128-bit token, a TTL, token-checked refresh and
// release, a fencing token (Fence) that strictly increases per name, and a
// watchdog that keeps it alive and closes Done the moment it is lost.
//
// # Lifecycle
//
//	lease, err := locker.Acquire(ctx, "nightly-report", dlock.WithTTL(30*time.Second))
//	if err != nil { ... }                 // ErrNotAcquired (+ *HeldError), ErrBackend, ErrInvalidArgument
//	defer lease.Release(context.Background())
//	work(lease.Context(ctx), lease.Fence()) // canceled on loss
//
// or, with acquire/run/release in one call: dlock.Do(ctx, locker, name, fn).
//
// # TTL and refresh
//
// Any lock with a TTL can expire while its holder is paused (GC, CPU
// throttling, SIGSTOP); any lock without one wedges forever after a crash.
// dlock keeps the TTL and refreshes it at TTL/3 while the holder runs. The
// lease is declared lost — Done closed, Err a *LostError, Context canceled
// — as soon as a refresh is refused, or when a third of the TTL is left
// without a confirmed refresh, so the holder hears of the loss before the
// backend can hand the lock to anyone else. Local expiry (Expires) is
// counted from when the request was sent, less a drift margin, on the
// monotonic clock.
//
// # Fencing
//
// A paused holder does not know it has been paused. Only the protected
// resource can reject its late write: pass Fence with every write and let
// the resource refuse fences lower than the highest it has seen (package
// fence). A lock alone is an efficiency lock; a lock plus fencing (and
// idempotency keys) is a correctness lock.
//
// # URLs
//
// Open picks the driver by URL scheme; see Open for the table. The query
// keys ttl, wait and owner set a Locker's defaults.
//
// A URL names all its settings or fails. Open refuses, with an error
// wrapping ErrInvalidArgument that names the part: a pair Go's URL.Query
// would silently drop (one holding a ';' — write it %3B inside a value —
// or a bad %-escape), a key given twice (but go-redis's addr, one per
// Cluster node), a key known neither to dlock, to the driver nor to the
// client library the URL is passed on to (go-redis refuses unknown keys
// itself; pgx passes them to PostgreSQL as settings, and a setting the
// server does not know fails Open), and a bad value — a duration that
// does not parse or does not fit, a negative Redis database number,
// retention=0. Locker.Settings reports the settings in force; the `dlock`
// command exits 2 (usage) on every such URL.
package dlock
