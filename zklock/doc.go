// Package zklock is dlock's ZooKeeper driver: the lock recipe of Apache
// Curator's InterProcessMutex on a ZooKeeper ensemble, with a lease that
// is the ZooKeeper session, fencing tokens from ZooKeeper's transaction
// ids, and FIFO queueing of waiters.
//
// Each contender for a lock NAME (the holder and every waiter) owns one
// ephemeral sequential znode, ROOT/escape(NAME)/_c_TOKEN-NONCE-lock-SEQ,
// in the session of its Locker. The node with the lowest sequence number
// holds the lock; the others wait in sequence order, each watching only
// the node just before its own, so a release wakes exactly one waiter (no
// herd). A waiter that gives up (its context, its wait bound) deletes its
// node at once. The "_c_" + GUID prefix is Curator's "protected" name: a
// contender whose create reply was lost (the connection dropped mid-call)
// finds its node again by it instead of leaving a phantom waiter that
// would block everyone until its session died; a create that completes
// after its caller gave up is deleted as soon as its reply arrives. The
// lock's znode is a container node, which ZooKeeper deletes once it is
// empty (ZooKeeper 3.5.3 or later).
//
// Differences from go-zookeeper's zk.NewLock: a lease-loss signal
// (Lease.Done), a fencing token, a bounded and cancelable wait that leaves
// the queue when it ends, every call bounded by its context, and a grant
// in one round trip when the lock is free.
//
// The run ledger of Locker.RunOnce (`dlock run --once-per`) lives under
// the same root: ROOT/%runs/escape(NAME) is a persistent znode holding the
// highest fence its writes have carried, with one persistent child per
// recorded slot. Every write is one multi() conditional on that znode's
// version, and a write under a lower fence is refused (driver.ErrNotHeld).
//
// Use Config.Locker with your own *zk.Conn, or dlock.Open with a zk URL.
//
// # URLs
//
//	zk://[user:password@]host:port[,host:port...][/root][?session_timeout=D&dial_timeout=D]
//
// lists the servers of one ensemble (the port defaults to 2181). The path
// is the root znode the locks live under (default DefaultRoot, "/dlock");
// it is created when missing. Query keys: session_timeout, the session
// timeout asked for (default 10 s; the server clamps it to its
// minSessionTimeout..maxSessionTimeout, 2 to 20 ticks by default: ask for
// one inside that range); dial_timeout, the bound on Open's wait for a
// session (default 5 s); and dlock's own ttl, wait and owner. Any other
// key is an error. user:password is sent as ZooKeeper digest
// authentication, and the nodes the Locker creates then carry the ACL
// "auth" (only that user may touch them); it never appears in errors. A
// root whose ACL refuses the session fails Open with an error naming it.
//
// # Fencing tokens
//
// A grant's fence is the czxid of its node: the zxid of the transaction
// that created it. ZooKeeper orders every write of the ensemble in one
// sequence of transaction ids (zxid = epoch<<32 | counter): the leader
// assigns them in commit order, a new leader starts a greater epoch, and a
// restarted server recovers the last zxid from its snapshot and
// transaction log before serving, so zxids never go back (see
// TestFencesSurviveRestart: graceful restart and SIGKILL). A node is
// granted only once every node of the name created before it is gone, and
// every node created later has a greater czxid; so grants of one name get
// strictly increasing fences across release, session expiry, takeover and
// ForceRelease, which deletes the holder's node in a transaction that also
// writes the lock's znode and returns that transaction's zxid (a later
// grant's czxid is greater). Fences are not consecutive and are large (the
// epoch is in the high 32 bits). Wiping the servers' data directories
// restarts zxids, and with them fences: don't.
//
// # Guarantees
//
// A correctness lock, within ZooKeeper's own guarantees: every create and
// delete is a linearizable write through the leader's atomic broadcast
// (ZAB), acknowledged by a quorum, so a minority of servers failing (even
// the leader) loses no lock; a contender learns it holds the lock from a
// read of the queue made after its own create on the same session, which
// ZooKeeper's FIFO client order makes reflect every earlier create.
//
// The lease is the session. While the Locker's session lives, its nodes
// live; when ZooKeeper expires the session (no heartbeat from the client
// for the session timeout), it deletes them and the next waiter is
// granted. The portable watchdog calls Refresh every TTL/3: it checks,
// locally, that the session is connected and the same one the node was
// created in, then that the node exists (one read). A grant's TTL is at
// most the session timeout, and the watchdog declares a lease lost when
// no refresh was confirmed for two thirds of it: so a holder cut off from
// the ensemble hears of the loss (Done closes with ErrLost) before
// ZooKeeper can expire its session and hand the lock on, and a disconnect
// shorter than that, which the session survives, loses nothing. A session
// that is found expired or replaced ends every lock held on it
// (driver.ErrSessionEnded). With dlock.WithAutoRefresh(false) the lease's
// Expires is only local bookkeeping: the node stays until Release or the
// session's end.
//
// A waiter's node is ephemeral in the same session, so a waiter that dies
// (killed, crashed, cut off for good) gives up its place within the
// session timeout (session_timeout in the URL; default 10 s), whatever
// the lock's TTL, plus at most one tickTime of the server's (it expires
// sessions in steps of one tick): a place does not outlive the
// heartbeat that shows its waiter alive, and a waiter that lives keeps it
// while its session does. Until then the dead waiter's node holds its
// place, and once the nodes before it are gone, the lock: a waiter that
// merely gives up (its context, its wait bound) deletes its node at once.
// The TTL plays no part in this: it only sets the watchdog's cadence, and
// is capped at the session timeout. A shorter session timeout hands on a
// dead waiter's place (and a dead holder's lock) sooner, and ends the
// session, with every lock and place of the Locker, of a client paused or
// cut off for longer.
//
// What ZooKeeper does not promise: reads are served by the server the
// session is connected to, which may lag the leader; Inspect, List and
// ForceRelease therefore call sync first. Refresh does not: a holder's
// node deleted by an administrator through another server is noticed
// once this server has applied the delete (normally milliseconds). The
// session timeout is measured by the servers' clocks, the lease by the
// holder's: a holder paused (GC, SIGSTOP) longer than the timeout can
// resume believing it still holds the lock for a moment: fence your
// writes (see TestPausedHolder). The server may negotiate a session timeout
// other than the one asked for; New's Config.SessionTimeout must not be
// longer than the negotiated one, or the lease can outlast the session.
package zklock
