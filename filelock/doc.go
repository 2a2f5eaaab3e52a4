// Package filelock is dlock's embedded local backend: a lease table in a
// SQLite file, shared by the processes of one host, with no server and no
// cgo (modernc.org/sqlite). It is what the dlock command and
// dlock.Open(ctx, "") use when no URL is given.
//
// # URLs
//
//	file:///absolute/path/to/dlock.db
//	file://localhost/absolute/path/to/dlock.db?sync=full&retention=10m
//
// The path must be absolute (percent-escapes are decoded); missing parent
// directories are created with mode 0700, and the file (with its -wal and
// -shm companions) with the process's umask: processes of other users can
// share it only if the file modes let them write. Its own query keys are
// sync, normal (default) or full, and retention, a Go duration (default
// 1h), both described under Fencing tokens (they are Config.Sync and
// Config.Retention in Go); dlock's ttl, wait and owner are accepted too,
// and any other key is an error. With no URL at all, dlock.Open uses dlock.DefaultURL:
// $XDG_STATE_HOME/dlock/dlock.db, or ~/.local/state/dlock/dlock.db.
//
// In Go, New (or Config.Locker) takes the path, and NewDB (or
// Config.DBLocker) takes a *sql.DB the caller opened with the "sqlite"
// driver (give it a busy timeout and WAL mode, as New does). Every Locker opened by path on one file in one process shares a
// single connection: writers queue for it in Go, and only other processes
// meet SQLite's file lock, where the busy timeout (5 s) makes them wait.
//
// # Fencing tokens
//
// Each name has one row holding its fence. Every new grant increments it in
// the same write transaction that grants the lock, and release keeps the
// row, so a name's fences strictly increase across holders, releases,
// expiries and force-releases (which bump it too). So that the file does
// not grow with every name ever locked, the rows of names nobody has held
// for the retention are deleted (during a release, at most once a minute).
// The same transaction first raises a file-wide fence floor to the highest
// fence among them, and a name's new row starts at the floor plus one, so
// fences strictly increase per name across that deletion too; a name's
// first fence is therefore not always 1. Every process sharing a file must
// run a dlock that knows the floor: an older one would start a deleted
// name again at 1. With sync=normal a
// commit survives any process crash but is synced to disk only at
// checkpoints, so an OS crash or power cut can undo the last few grants and
// hand their fences out again, after reboot, when every holder of those
// grants has died with the machine; a fenced resource that rejects equal
// fences may then refuse the new holder until the fence passes the old
// one. sync=full syncs every commit so that no fence is ever handed out
// twice, at several times the cost of a grant. Deleting
// the database file starts every fence again from 1: do not, while fenced
// resources remember old fences.
//
// # Guarantees
//
// One host only. Processes coordinate through SQLite's file locks and a
// shared-memory WAL index, so all of them must see the same file through
// the same kernel (containers sharing a bind mount on one host are fine).
// On NFS, SMB or other network file systems file locking is unreliable and
// WAL mode does not work at all: never put the file there; use a server
// backend.
//
// A grant is one write transaction: the lock is granted if it is free,
// expired, or already held by the same token (an attempt whose reply was
// lost gets its grant, and fence, back). Refresh and release are single
// token-checked statements that never revive a lease that is gone.
// Expiry is decided by the host clock, read by SQLite at each statement;
// every process reads the same clock, so there is no skew between holders,
// but a wall-clock step (manual change, large NTP correction) shortens or
// lengthens leases.
//
// A process that crashes or is killed leaves its row behind: the lock is
// free when its TTL runs out (default 30 s). A crash in the middle of a
// transaction is rolled back by SQLite, never half-applied. A process paused
// (SIGSTOP, swap, debugger) past its TTL loses the lock to the next taker
// while it may still believe it holds it; the watchdog declares the lease
// lost locally a third of the TTL before expiry, and fences reject writes
// that happen anyway. Within those limits this is a correctness lock for one
// machine. A process stuck inside a write transaction for more than the 5 s
// busy timeout makes other processes' calls fail with SQLITE_BUSY (reported
// as backend errors; transactions here last microseconds).
//
// Waiters: SQLite cannot notify other processes, so each process runs one
// watcher goroutine, only while something in it waits, that polls the table
// for names released since it last looked (every 2 ms while releases keep
// coming, slowing to every 32 ms while none do) and wakes the
// longest-waiting waiter of each; releases made in the same process wake it
// at once. Concurrent attempts on one name in one process share one trip
// to the database, so a crowd of local waiters never queues in front of the
// holder's refresh. Expiry wakes nobody: a waiter's backoff is bounded by
// the holder's remaining TTL. Waiters in different processes race for a
// freed lock; there is no cross-process queue or fairness.
//
// Force-releases: ForceRelease records the eviction in the file, in the
// transaction that evicts, and the same watcher goroutine, while a Locker
// of its process holds leases, polls for new records every 50 ms (or with
// the release polls, when those are faster) and ends the evicted lease at
// once as force-released (dlock.LostForceReleased), instead of at its next
// refresh. Measured from another process: `dlock run` exits 15 / 46 / 72 ms
// (min / median / max of 10) after `dlock release --force` returns. The
// polling costs a holding process about 1% of a core on a 2-core VM.
// Records are kept for 10 minutes.
//
// SQLite's POSIX file locks belong to the process: if other code in the
// same process opens and closes the database file directly, the kernel
// drops this process's locks. Open the file only through this package (or
// see modernc.org/sqlite's OFDLocking).
package filelock
