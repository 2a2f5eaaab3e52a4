// Package etcdlock is dlock's etcd driver: locks on a strongly consistent
// coordinator, with FIFO queueing of waiters and fencing tokens that come
// free with etcd's revision counter.
//
// Each contender for a lock NAME (the holder and every waiter) owns one key,
// PREFIX/escape(NAME)/TOKEN, bound to an etcd lease of its own. The key
// with the smallest create revision holds the lock; the others wait in
// create-revision order, each watching only the key just before its own, so
// a release wakes exactly one waiter (no thundering herd). The same layout
// as etcd's concurrency.Mutex, with two differences:
//
//   - a waiter's watch starts at the server's current revision, not at a
//     revision the server has already passed. etcd 3.4 serves such a
//     "catching up" watch from a loop that runs every 100 ms, which caps
//     concurrency.Mutex at about one grant per waiter per 100 ms (160
//     critical sections per second for 16 waiters). The next waiter in line
//     also looks at the holder's key itself a few times during its watch's
//     first 100 ms, for the rare watch etcd still starts late. Woken by the
//     holder's release, it holds the lock without another round trip (see
//     moveOn in queue.go); woken by a waiter leaving, it reads the queue at
//     the revision of that deletion, from the member that reported it,
//     without a quorum round. See the benchmarks;
//   - no clientv3 KeepAlive goroutine runs: the portable layer's watchdog
//     renews each lease with one KeepAliveOnce per refresh (a waiter renews
//     its own while it waits), so nothing outlives a lease.
//
// Use New with your own *clientv3.Client, or dlock.Open with an etcd URL.
// Leases are whole seconds and at least MinTTL (2 s): etcd 3.4 silently
// turns 0, -1 and 1 s into 2 s, so shorter TTLs are refused up front.
//
// # URLs
//
//	etcd://[user[:password]@]host:port[,host:port...][?prefix=P&dial_timeout=D]
//
// lists the client endpoints of one cluster (IPv6 literals are not
// supported in the list; use host names). Query keys: prefix, the etcd key
// prefix (default DefaultPrefix, "dlock/"); dial_timeout, the bound on the
// first connection (default 5 s); and dlock's own ttl, wait and owner. Any
// other key is an error. TLS endpoints need a client built by the caller
// and New. The password is sent to etcd's auth and never appears in errors.
//
// # Fencing tokens
//
// A grant's fence is the create revision of its key. etcd has one revision
// counter for the whole keyspace: every write transaction increments it,
// it is replicated through Raft with the write, so every member agrees on
// it, and it never goes back, not on leader change, restart, or compaction.
// A key is granted only once every key for the name created before it is
// gone, and any key created later has a greater create revision, so grants
// of one name get strictly increasing fences across release, expiry (the
// lease's keys are deleted by a write like any other), takeover and
// ForceRelease, whose delete happens at a revision lower than any later
// grant's and is returned as the new fence. Fences are not consecutive.
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
// Waiters are served in arrival order (create revision). A waiter renews
// its own lease while it waits; if that or its watch fails (etcd
// unreachable), it leaves the queue and its Acquire fails with the backend
// error rather than waiting blind.
package etcdlock
