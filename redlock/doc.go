// Package redlock is the dlock driver for Redlock: one lock over N
// independent Redis nodes (no replication between them), granted by a
// majority of them, with the fencing tokens Redlock is usually said not to
// have.
//
//	clients := []redis.UniversalClient{c1, c2, c3, c4, c5}
//	locker, err := redlock.New(clients, dlock.WithTTL(10*time.Second))
//
//	// or, with a node timeout of 20 ms and fencing off:
//	locker, err = redlock.Config{NodeTimeout: 20 * time.Millisecond, NoFencing: true}.Locker(clients)
//
// An acquire asks every node at once, each bounded by a node timeout far
// below the TTL (Config.NodeTimeout, default 50 ms), and returns as soon as a
// majority has granted or a majority has become impossible: a slow or dead
// node costs at most the node timeout, never its own delay. The grant
// stands only if the majority was reached with validity left, counted on
// this process's monotonic clock from before the first request:
// validity = TTL − elapsed − drift, drift = TTL × 1% + 2 ms. A failed
// attempt releases the lock on every node it may have reached, including
// nodes whose reply was lost. Refresh needs a majority and never
// re-creates a key a node has lost; losing the majority closes Done.
// The watchdog's refreshes go in batches (RefreshBatch): one pipelined
// script call per node for up to 1,000 leases, each lease decided by its
// own majority, so that one Locker can hold 10,000 leases.
// Release is token-checked on every node. Waiters are woken by the nodes'
// release notifications (one subscription connection per node per
// Locker), polling only as a fallback; contended waiters take the lock
// through one "gate" node first so that they do not split the votes.
// An outage never reads as "held": an attempt without a majority reports a
// holder only when the nodes that named one are enough, alone, to make a
// majority impossible (more than N − quorum of them; or, in gate mode, the
// gate named one and nobody else was asked); otherwise it returns the
// nodes' errors on one line, separated by "; ", each naming its node and
// cause ("redlock node 10.0.0.3:6379: cannot connect: connection
// refused"; a node that timed out is dialed once more to learn why), and
// marked driver.Permanent when permanent errors (NOAUTH,
// NOPERM, a script error) alone make a majority impossible. An attempt
// whose caller's deadline passed returns at once; the nodes it reached are
// released in the background. Inspect and List report a holder only when a
// majority of nodes agree on it; ForceRelease deletes the lock on every node and raises the fence on
// a majority above every fence granted before (see admin.go).
//
// # URLs
//
//	redlock://[user:password@]host1:port1,host2:port2,host3:port3[/db][?query]
//
// A libpq-style host list (an odd number, at least 3, no duplicates; port
// 6379 when omitted; IPv6 literals are not supported in the list). Every
// node gets the same user, password and database, and the go-redis query
// options of redis.ParseURL (dial_timeout, read_timeout, pool_size, ...).
// The driver's own keys: node_timeout (a duration, default 50ms), fencing
// (true or false, default true), tls (true: connect to every node as
// rediss://) and context_timeout_enabled (default true; go-redis's
// ParseURL does not read it). The portable keys ttl, wait and owner set the Locker's
// defaults; any other key is an invalid argument. Clients built from a URL
// honour context deadlines (ContextTimeoutEnabled) and are closed by
// Locker.Close; clients passed to New stay the caller's.
//
// # Fencing tokens
//
// Every node keeps a fence counter per name beside the lock key. Phase 1
// takes the key and increments the counter in one atomic step; the grant's
// fence is the highest counter among the first majority to grant; phase 2
// raises the counter to that fence on the nodes that returned less, if
// the key is still ours there; the lease is returned only when a majority
// holds a counter at least the fence while the key was ours. Any two
// majorities intersect, so a grant that starts after another was returned
// reads a counter above the earlier fence, and no two returned grants ever
// share a fence (the argument, with its assumptions, is the comment on
// TryAcquire in acquire.go). While the nodes'
// counters agree — the common case — phase 2 is skipped: fencing then
// costs no extra round trip; after a split vote or a node restart it costs
// one. A counter lost with its node is re-seeded from the node's clock
// (whole seconds times a million), so fences are large numbers (about
// 1.8e15 in 2026). Assumptions: counters never decrease (persistence, or
// the clock seed staying above what the counter held: node clocks never
// set back and roughly agreeing, fewer than a million grants per second
// per name). Config.NoFencing (URL fencing=false) skips the
// counters for efficiency-only locks: one round trip always, Fence() = 0.
// Counters outlive the locks: one small key per name per node (unlike the
// single-server driver, whose counters are per server or per slot:
// bounding Redlock's needs the same per-node migration and is not done
// yet).
//
// # Guarantees
//
// Mutual exclusion rests on Redlock's assumptions: bounded clock drift
// between the nodes and this process (covered by the drift margin), no
// clock jumps on the nodes (an expiry that comes early frees the lock
// early), bounded process pauses (a holder paused past its validity does
// not know it, as with any lease), and nodes that restart without fsynced
// persistence staying down for at least the longest TTL (or they forget
// locks a majority still counts on). When those assumptions fail, two
// clients can each hold a majority at once; this package's tests reproduce
// exactly that (Kleppmann's clock-jump scenario).
//
// What the quorum fence still protects: the fences of the two holders
// differ and the later grant's is higher, whatever the clocks did, so a
// resource that rejects writes with a fence lower than the highest it has
// seen (package fence) rejects the stale holder's writes once the newer
// holder has written. That protection needs only that counters never go
// backwards, not synchronized clocks.
//
// The run ledger (Locker.RunOnce, Locker.Runs; it needs quorum fencing,
// else dlock.ErrUnsupported) is a copy of each name's runs on every node,
// at dlock:redlock:{name}:runs and dlock:redlock:{name}:runs:slots, in the
// single-node driver's format and fenced scripts (see redislock): no
// expiry, the newest dlock.WithKeepRuns slots. A claim reads the slot on
// every node and, if the slot is free, writes it to every node; it stands
// once a majority took it, and only a claim that stood runs its job. A
// read (Runs, and a claim's look at the slot) needs a majority of the
// nodes to answer and merges their copies: per slot, from the highest
// fence down, the first record that a node has with an outcome, or that
// the nodes holding it (or a later record of the slot), with the nodes
// that did not answer, could make a majority. A claim that stood is on a
// majority, which every majority that answers a read meets, so the slot
// is run at most once (WithRetryCrashed aside) while the lock excludes
// and no node forgets its ledger. The limits: a node that restarts
// without fsynced persistence comes back empty, which is harmless while
// the rest of the claim's majority keeps its copies, but when a majority
// of the copies are gone the slot is forgotten and may run again. A claim
// that failed yet may have reached a majority (its replies came too late,
// or nodes that did not answer could hold it) counts as the slot's run,
// reported as crashed, though its job never ran: the slot runs again only
// with WithRetryCrashed. A claim found on a minority while every node
// answers is a failed claim's leftover, not the slot's run: the next claim
// replaces it. An outcome recorded on fewer than a majority makes
// FinishRun fail, yet a read shows it. A stale holder's write is refused
// (driver.ErrNotHeld) when any node answering has seen a higher fence.
//
// The plain advice: for a correctness lock, prefer a consensus store
// (etcd, or PostgreSQL) whose fencing comes from one linearizable log, and
// fence the resource anyway. Redlock is for teams that already run several
// independent Redis nodes and want a lock that survives the loss of a
// minority of them; with fencing enforced at the resource it is safe for
// correctness too, without fencing it is an efficiency lock.
package redlock
