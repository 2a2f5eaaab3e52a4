// Package redislock is the dlock driver for Redis: a single server (with or
// without replicas) or a Redis Cluster, through any go-redis v9 client.
//
//	client := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
//	locker, err := redislock.New(client)
//	...
//	lease, err := locker.Acquire(ctx, "billing/run", dlock.WithTTL(10*time.Second))
//
// Acquiring costs one round trip: one script takes the lock (SET NX PX
// semantics) and issues its fence, or describes the holder; a retry that
// finds its own token (the first reply was lost) is a grant. Refresh and
// release are one token-checked script each; refresh never re-creates a
// lock and says whether it was gone or taken over. Release publishes on
// the lock's channel; a Locker's waiters share ONE pub/sub connection, and
// each release wakes one waiter per Locker (the one waiting longest),
// which tries at once: no herd, and polling with backoff is only the
// fallback for a lost message or an expiry. The watchdog refreshes many
// leases in one script call per batch (per hash slot in a Cluster).
//
// By default (WithFairQueue, URL key fair) it goes further: waiters queue in Redis,
// first come first served, a free lock goes only to the head of the queue,
// and the release message goes only to that head's own channel, so exactly
// one waiter in the whole system is woken and tries. Lockers without it
// respect the queue too.
//
// Keys, all sharing the {name} hash tag so that one script can use them in
// a Cluster: prefix{name} (the lock: "token\nfence\nowner" with a PX
// expiry), prefix{name}:fence (the counter), prefix{name}:queue and
// prefix{name}:waiters (the fair queue; they expire when nobody waits) and
// the channels prefix{name}:released and prefix{name}:released:TOKEN (one
// per queued waiter). A '}' in a name is stored as %7D.
//
// # URLs
//
//	redis://[user:password@]host:port[/db][?key=value...]
//	rediss://...                     TLS
//	redis://h1:p1?addr=h2:p2&addr=h3:p3   a Cluster (go-redis's ParseClusterURL)
//	redis://h1:p1?cluster=true       a Cluster reached through one seed node
//
// The URL goes to go-redis's ParseURL (or ParseClusterURL when it has addr
// keys or cluster=true), so every go-redis option key works (dial_timeout,
// pool_size, protocol, ...). The driver's own keys are prefix (key prefix,
// default "dlock:"), fair (WithFairQueue), replica_sync (WithReplicaSync)
// and replica_timeout (WithReplicaTimeout); dlock.Open's ttl, wait and
// owner are handled before.
// Any other key is an error wrapping dlock.ErrInvalidArgument. Open checks
// the connection with PING. Passwords never appear in errors.
//
// # Fencing tokens
//
// Each name has one counter key that never expires. A grant's fence is
// max(previous + 1, the server's clock in microseconds), taken inside the
// acquire script (Redis TIME), so fences strictly increase per name across
// release, expiry and takeover, and also after the counter is lost or
// rolled back (restart without persistence, FLUSHALL, failover to a replica
// that lacked the last writes): the next fence is at least the server's
// clock. That rests on two assumptions, stated plainly: the clock of the
// server (or of the replica promoted in its place) does not step back by
// more than the time between the last grant and the loss, and one name is
// not granted more than once per microsecond. Fences are therefore large
// numbers (about 1.8e15 in 2027), not 1, 2, 3. ForceRelease bumps the
// counter the same way.
//
// A Locker warns once per server (log/slog, WithLogger) when the server has
// appendonly off: a restart then forgets held locks.
//
// # Guarantees
//
// On a single server that stays up, this is a correctness lock when work is
// fenced: mutual exclusion holds while leases are refreshed, and a pause
// longer than the TTL is caught by the fence. Redis replication is
// asynchronous: a failover can promote a replica that never received a
// grant, and a second holder can then acquire. WithReplicaSync(n) closes
// most of that window: a grant counts only after WAIT confirms n replicas
// have it (refreshes are not waited for, and WAIT does not make Redis a
// consensus system: a failover that picks a replica behind the others can
// still lose a grant). A restart without persistence loses every lock.
// Expiry uses the server's clock, and the holder counts its lease from
// before the request was sent, less a drift margin. Without fencing, treat
// it as an efficiency lock.
package redislock
