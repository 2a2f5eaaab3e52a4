// Package etcdlock is dlock's etcd driver: locks on a strongly consistent
// coordinator, with FIFO queueing of waiters and fencing tokens that come
// free with etcd's revision counter.
//
// Each contender for a lock NAME (the holder and every waiter) owns one key,
// PREFIX/escape(NAME)/LEASE-SLOT. The key with the smallest create revision
// holds the lock; the others wait in create-revision order, each watching
// only the key just before its own, so a release wakes exactly one waiter
// (no thundering herd). The layout of etcd's concurrency.Mutex, with these
// differences:
//
//   - one shared etcd lease per driver and TTL, like a
//     concurrency.Session, granted lazily: an acquire is one write (a
//     compare-and-put; uncontended, it reads nothing) and a release one
//     delete, as with the Mutex. The lease is renewed by the portable
//     watchdog's refreshes (one KeepAliveOnce per distinct lease per batch,
//     see RefreshBatch), by a waiter while it waits, and by an acquire
//     that finds it last renewed more than TTL/12 ago; it is revoked a
//     third of a TTL after its last key went, and by Close (unless it
//     carries a detached lock, see below). No clientv3 KeepAlive goroutine
//     runs, no goroutine outlives Close, and no lease is renewed after it;
//   - a waiter's key waits under the driver's wait lease, the shared lease
//     of its shortest TTL, MinTTLFor(the election timeout), whatever the
//     lock's TTL, and the waiter renews it every third of it while it
//     lives. One transaction that requires the key unchanged moves it to
//     the lease of the lock's TTL (a Put keeps a key's create revision: its
//     place and its fence): for a waiter with a deadline when it becomes
//     first, before it is granted (its claim, see below); for a waiter
//     without one at its grant's first refresh, so that the move is not a
//     write in series at each handoff. Until then that grant is
//     provisional (driver.Grant.Window): it lasts as long as the wait
//     lease does from its last renewal, its first refresh is due within a
//     third of that, and a lease without auto-refresh is moved before its
//     acquire returns. A waiter that dies thus gives up its place within
//     the wait lease, not the lock's TTL, and so does a holder handed the
//     lock that dies or stalls before its first refresh. A waiter renews
//     every third of the wait lease rather than of the TTL (waiters of
//     one driver share those renewals). The attempt to take a free
//     lock queues the key under the wait lease in the same transaction
//     when the driver has one renewed less than a third of it ago (while
//     any of its waiters waits); otherwise queueing is one write more;
//   - each key still keeps its own TTL: the driver remembers when each
//     key's holder last asked for it (grant, refresh, a waiter's renewal),
//     and every renewal of the shared lease first deletes the keys nobody
//     asked for within a TTL (a lease the watchdog declared lost, a lock
//     without auto-refresh, a release that failed). A lock's key thus ends
//     at most a third of its TTL later than it would under a lease of its
//     own, and a lost shared lease ends every lock under it (their
//     refreshes report driver.ErrSessionEnded);
//   - keys are reused from one grant to the next (SLOT tells apart one
//     driver's concurrent contenders for one name): etcd keeps every
//     deleted key in its index until a compaction, and a key per grant
//     made every read of a lock's directory slower with each grant;
//   - a waiter's watch starts at the server's current revision, not at a
//     revision the server has already passed. etcd 3.4 serves such a
//     "catching up" watch from a loop that runs every 100 ms, which caps
//     concurrency.Mutex at about one grant per waiter per 100 ms. etcd
//     still starts a watch late when a write lands while it creates it,
//     which under contention is often, so during its watch's first 100 ms
//     a waiter also looks at its predecessor itself (a serializable read
//     every 10 ms when next in line, every 25 ms otherwise). Woken by the
//     holder's release, it holds the lock without another round trip (see
//     moveOn in queue.go);
//   - a held key's value is its owner and the SHA-256 digest of its token
//     (never the token), so another client can prove that a token holds
//     it: Locker.Resume (driver.Adopter) puts the key, unchanged (same
//     create revision: same fence), under the resuming driver's own lease
//     in one transaction. The granting driver's lease no longer carries
//     it: that lease ending (Close, a dead process) leaves the lock alone,
//     and its renewals never delete a key that moved away. Close leaves
//     a lease that still carries a detached lock (Lease.Detach) to run out
//     on its own, so that the lock can be resumed within its TTL.
//
// Use New with your own *clientv3.Client, Config.Locker to say the key
// prefix or the cluster's election timeout, or dlock.Open with an etcd URL. Leases are
// whole seconds and at least MinTTLFor(election timeout): 8 s for etcd's
// default 1 s election timeout (see MinTTLFor for why), never less than
// MinTTL (2 s, etcd's own floor, which it applies silently).
//
// # URLs
//
//	etcd://[user[:password]@]host:port[,host:port...][?prefix=P&dial_timeout=D&election_timeout=E]
//
// lists the client endpoints of one cluster (IPv6 literals are not
// supported in the list; use host names). Query keys: prefix, the etcd key
// prefix (default DefaultPrefix, "dlock/"); dial_timeout, how long Open
// waits for some endpoint to answer (default DefaultDialTimeout, 2 s);
// election_timeout, the cluster's --election-timeout (default 1 s), which
// sets the minimum TTL; and dlock's own ttl, wait and owner. Any other key
// is an error. Open connects to every endpoint at once and fails within
// dial_timeout unless one answers, naming each endpoint and its cause
// ("connection refused" at once; "no answer within 2s" for a member that
// accepts connections but does not answer). TLS endpoints need a client
// built by the caller and New. The password is sent to etcd's auth and
// never appears in errors; a failed authentication or a permission denied
// is marked driver.Permanent, so that waits stop at once.
//
// ForceRelease deletes the holder's key and, in the same transaction
// (conditional on the key's create revision, so a new grant of a reused
// key is never deleted), puts an eviction record PREFIX%evicted/NAME valued
// "FENCE NAME" under a 10 s lease of its own. Every Locker holding leases
// watches that directory (driver.EvictionWatcher), so the evicted holder's
// lease ends at once with LostForceReleased instead of at its next refresh;
// if the watch is down, the refresh still tells it. The records never look
// like locks: a name is path-escaped in its keys and never yields a bare %.
//
// # Run ledger
//
// The driver implements driver.Ledger (Locker.RunOnce, `dlock run
// --once-per`): PREFIX%runs/NAME/SLOT holds the record of each recorded
// slot of NAME as JSON, and PREFIX%runs/NAME the highest fence a write to
// NAME's ledger has carried. The keys are under no lease: records outlive
// locks and Lockers, and stay until the newest dlock.WithKeepRuns slots
// push them out. Each write is one transaction, fenced by a compare of
// the fence key and decided on the slot key's mod revision, so a write
// under an older grant is refused (driver.ErrNotHeld) and two callers
// never both claim a slot. Slots are kept to the nanosecond, from 1970 to
// 2262; others are refused (dlock.ErrInvalidArgument).
//
// # Fencing tokens
//
// A grant's fence is the create revision of its key. etcd has one revision
// counter for the whole keyspace: every write transaction increments it,
// it is replicated through Raft with the write, so every member agrees on
// it, and it never goes back, not on leader change, restart, or compaction.
// A key is granted only once every key for the name created before it is
// gone, and any key created later, including the same key created again
// (keys are reused), has a greater create revision, so grants of one name
// get strictly increasing fences across release, expiry (the lease's keys
// are deleted by a write like any other), takeover and ForceRelease, whose
// delete happens at a revision lower than any later grant's and is
// returned as the new fence. Fences are not consecutive.
//
// # Guarantees
//
// A correctness lock, within etcd's own guarantees: every grant, refresh
// and release is a linearizable operation on a Raft-replicated store, so a
// minority of members failing (a member stopped, a leader change) loses no
// lease, while a client cut off from a quorum cannot refresh and its
// watchdog declares the lease lost before the server-side TTL ends it. A
// holder that pauses for longer than its TTL (GC, SIGSTOP) may still act
// after its lease ended, as with every lease: fence the protected writes.
//
// A leader election stops all writes and renewals for up to two election
// timeouts. The watchdog refreshes a third of a TTL after the last
// confirmed renewal, retries every TTL/12 and gives the lease up when two
// thirds have passed, so a TTL below 8 election timeouts can lose a
// healthy lock during an ordinary election (3 s with etcd's default 1 s:
// lost in 3 of 5 trials). The driver therefore refuses TTLs below
// MinTTLFor(election timeout). It cannot read the members'
// --election-timeout over the client API: it assumes etcd's default, 1 s,
// unless the URL's election_timeout or Config.ElectionTimeout says
// otherwise. Saying a shorter one than the cluster's allows TTLs that an
// election can break.
//
// An outage never reads as contention: Acquired is false only when etcd
// answered that another key holds the name; any failure (a frozen or
// unreachable member, a lost quorum) is an error, returned by the caller's
// deadline (clean-up that cannot finish by then, such as deleting an
// abandoned waiter's key, continues in the background, and failing that,
// at the shared lease's next renewal, or with the lease). An attempt given
// up before etcd answered its put cannot know whether the put will still
// land (a stalled member applies what it queued in no set order, so even
// after the delete): its session then takes no new keys and is revoked as
// soon as the keys already under it are gone, which deletes such a put or
// makes it fail, and until then each renewal deletes it again. A waiter
// with a deadline says so in its key's value, and a TryAcquire that finds
// such a key first after that deadline deletes it (see waitMark); the
// waiter takes the lock only by a claim that a sweep makes fail. A wait that
// reaches its deadline reports the holder only if etcd confirmed it in a
// last read shortly before the deadline. Waiters are served in arrival
// order (create revision). A waiter renews its wait lease while it
// waits; if that or its watch fails, it leaves the queue and its Acquire
// fails with the backend error (which the portable layer retries within
// the wait) rather than waiting blind.
//
// A waiter that dies (killed, crashed, cut off for good) gives up its
// place within the wait lease, MinTTLFor(election timeout): 8 s for
// etcd's default 1 s, whatever the lock's TTL, and sooner if it was
// renewed less than a wait lease before. Until then its key holds its
// place, and once the waiters before it are gone, the lock. A live
// waiter keeps its place as long as one of its renewals reaches a quorum
// before its wait lease ends, which an ordinary leader election does not
// prevent (the wait lease is long enough for one, see MinTTLFor). A
// waiter cut off from a quorum for longer loses its place: its key ends
// with the lease, the waiter notices at its next renewal (the lease is
// gone) or when it would be granted (the move requires its key), and
// queues again at the back, behind everyone who queued meanwhile. That is
// the cost: its turn, never a grant on a key that is gone.
package etcdlock
