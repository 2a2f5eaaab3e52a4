// Package redislock is the dlock driver for Redis: a single server (with or
// without replicas) or a Redis Cluster, through any go-redis v9 client.
//
//	client := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
//	locker, err := redislock.New(client)
//	// or: redislock.Config{Prefix: "billing:", ReplicaSync: 1}.Locker(client)
//	...
//	lease, err := locker.Acquire(ctx, "billing/run", dlock.WithTTL(10*time.Second))
//
// Acquiring costs one round trip: one script takes the lock (SET NX PX
// semantics) and issues its fence, or describes the holder; a retry that
// finds its own token (the first reply was lost) is a grant. Refresh and
// release are one token-checked script each; refresh never re-creates a
// lock and says whether it was gone or taken over. Release publishes on
// the lock's channel while someone watches it (a watched mark, set by
// Watch and by each attempt that finds the lock held, for 30 s: with no
// mark and no queue the release publishes nothing, which saves the
// uncontended release a call; waiters of versions without the mark are
// then woken by their backoff); a Locker's waiters share ONE pub/sub connection, and
// each release wakes one waiter per Locker (the one waiting longest),
// which tries at once: no herd, and polling with backoff is only the
// fallback for a lost message or an expiry. The watchdog refreshes many
// leases in one script call per batch (per hash slot in a Cluster).
//
// By default (unless Config.NoFairQueue, URL key fair=false) it goes
// further: waiters queue in Redis, first come first served, and a release
// hands the lock to the waiter at the head of the queue, with a fresh
// fence, inside the release script, and wakes only that waiter (the
// message "p FENCE TIME PX" on its Locker's inbox, led by its token): no
// other waiter in the system is woken, and no waiter races another. The
// inbox is one channel per Locker, prefix inbox:ID (ID 128 random bits),
// subscribed on the Locker's pub/sub connection at its first queued wait
// and kept until Close: a wait costs no SUBSCRIBE or UNSUBSCRIBE of its
// own. A waiter's attempts name the inbox, which the queue keeps with the
// waiter's request. The first wait of a Locker subscribes it once its
// first attempt has queued it, and attempts again (a release may have
// come before the subscription was in place); later waits listen first,
// and one attempt queues them. A Locker that cannot subscribe its inbox
// (Redis does not confirm within 5 s) has each waiter subscribe a channel
// of its own, prefix{name}:released:TOKEN, as versions before inboxes
// did; their scripts know only those channels, so during a rolling
// upgrade a waiter of this version behind a release of an older one is
// not told, and finds the lock when it next polls (within a second).
//
// A hand-off is provisional: the lock is the head's for one second (its
// TTL if shorter), and the message is the head's grant for that second
// (driver.Grant.Window): the head goes ahead at once, with no round trip
// of its own, and its lease's first refresh, due a third of a second
// later (at once, before Acquire returns, for a lease without the
// watchdog), extends it to the full TTL. A waiter renews its place in the
// queue every second, and its place lapses three seconds after its last
// renewal, so a waiter that has just died can still be at the head when
// the lock is released. It never refreshes, and holds the lock for the
// one second only, not for its TTL: the next waiter takes the lock when
// it next polls (a waiter polls when the holder's TTL runs out), about a
// second after the release whatever the TTL. The refresh is what tells a
// live waiter from a dead one: nothing Redis holds at the release does (a
// dead waiter's place and subscription outlive it until they time out),
// and skipping heads whose last renewal is merely late would take turns
// from live waiters slowed by load; the release skips only heads whose
// place has lapsed. A live head that misses the second (a long pause) is
// told its lease was lost, as any holder whose refresh comes too late.
// Under Config.ReplicaSync, and when the message is lost, the head's next
// attempt finds the lock handed to it and confirms it by extending it to
// its TTL (followed by WAIT under replica sync, as every grant is); a
// head whose attempt comes after the second ran out loses that turn
// only: it rejoins the queue at the place where it first queued, not at
// the tail. A waiter that gave up while the lock was being handed to it
// frees it when it leaves the queue (and the portable layer releases its
// token). An attempt that Redis runs after its waiter's deadline (sent in
// time, run late: a slow link, a client descheduled before the write, a
// server backlog) takes nothing, even from a free lock, and frees a lock
// handed to it: granted, it would hold the lock for nobody, for its whole
// TTL when the waiter's cleanups came first. The deadline travels on the
// server's clock: each queued attempt's reply (and a TIME read by New)
// shows the skew between the two clocks, to within the call's latency,
// and the deadline sent is never later than the waiter's, at most that
// latency earlier. An attempt sent with more than three seconds of its
// wait left (or with no deadline at all) carries none, and one whose
// caller is canceled has no deadline to miss: such an attempt, given up
// on while in flight, is undone once its reply comes (it leaves the queue
// and frees a lock it won), whichever order it and its caller's cleanups
// reached Redis in. A batch release (Locker.Close) hands each lock off the
// same way, in the same script. Where the lock is freed without a release (its
// holder's TTL ran out, which the waiters find by polling, or a waiter
// handed it back as it left the queue) the head takes it with an attempt
// of its own, and a dead head costs the others at most the three seconds
// its place takes to lapse. Lockers without the fair queue respect the
// queue too. Waiters of older versions read the message as a wake-up:
// their attempt confirms the hand-off just the same.
//
// The uncontended acquire is one script of four server calls (TIME;
// EXISTS of the lock, the queue and a legacy counter; SET ... GET of the
// fence counter; SET PX of the lock); only a queue, a held lock or a
// legacy counter takes the longer path. The uncontended release is three
// (GET, DEL, and EXISTS of the queue and the watched mark). Scripts are cached on the server
// by New (SCRIPT LOAD) and sent by digest (EVALSHA). Redis 6.2 or later is
// needed (SET ... GET).
//
// Keys, all sharing the {name} hash tag so that one script can use them in
// a Cluster: prefix{name} (the lock: "token\nfence\nowner" with a PX
// expiry), prefix{name}:queue, prefix{name}:waiters and prefix{name}:asks
// (the fair queue, the waiters' deadlines and requests; they expire when
// nobody waits), prefix{name}:watched (the watched mark, which expires
// 30 s after a waiter last set it), prefix{name}:runs and
// prefix{name}:runs:slots (the run ledger, below; no expiry), and the
// channels prefix{name}:released, prefix + "inbox:ID" (one per Locker) and,
// for the waiters of a Locker without its inbox, prefix{name}:released:TOKEN.
// The asks hash keeps a waiter's request under its token, and under the
// field TOKEN followed by a newline the inbox its attempts named. A '}' in a name is stored as %7D. The fence counter is
// prefix + "fence", one per server, or in a Cluster prefix + "fence:{TAG}",
// one per hash slot (TAG a short string chosen to hash to the slot): a
// released name leaves no key but its run ledger, if RunOnce used it.
//
// Run ledger. The driver is a driver.Ledger (Locker.RunOnce, Locker.Runs):
// a name's runs are a hash, prefix{name}:runs, of records by slot (the
// slot's Unix nanoseconds in 19 digits -> JSON: owner, fence, attempt,
// schedule, start and end in Unix nanoseconds, status), plus the field
// "fence", the highest fence a ledger write has carried; and an index of
// its slots, prefix{name}:runs:slots (a sorted set). A claim and an
// outcome are one script each, atomic and fenced: a write under a fence
// below the highest is refused (driver.ErrNotHeld), fences compared as
// decimal strings, exactly. The claim script drops the slots beyond the
// newest keep (dlock.WithKeepRuns), so a name's ledger never holds more;
// the keys have no expiry and nothing deletes them: they last as long as
// the data set (a name no longer scheduled keeps its last keep runs until
// deleted by hand). Runs is one HGETALL. The ledger needs what the locks
// need, for longer: with appendonly yes a restart keeps it (every write
// handed to the kernel survives a process crash; appendfsync always also a
// host crash), without it a restart forgets which slots ran and a slot may
// run again; and maxmemory-policy noeviction, as the other policies may
// evict it once memory is full (Diagnose checks both). Under
// Config.ReplicaSync a claim and an outcome count only once WAIT confirms
// the replicas have them, as a grant does.
//
// ForceRelease (dlock admin) announces each eviction on the channel
// prefix + "evicted" ("FENCE NAME"). A Locker that holds leases listens
// there (driver.EvictionWatcher, on its one pub/sub connection), so the
// evicted holder's lease ends at once with dlock.LostForceReleased
// instead of at its next refresh. The announcement is best effort: a
// message lost to a disconnect leaves the next refresh as the signal.
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
// pool_size, protocol, ...). The driver's own keys are those of Config:
// prefix (Prefix; an empty one is an error), fair (false sets
// NoFairQueue), replica_sync (ReplicaSync) and replica_timeout
// (ReplicaTimeout); then cluster, and context_timeout_enabled (go-redis's
// Options.ContextTimeoutEnabled, which go-redis's ParseURL does not
// read): it defaults to true, so that every call returns by its
// context's deadline even when the server is frozen; false restores
// go-redis's behaviour (a stalled read waits out read_timeout, and is
// retried). dlock.Open's ttl, wait and owner are handled before.
// Any other key is an error wrapping dlock.ErrInvalidArgument. Open checks
// the connection with PING. Passwords never appear in errors. A client
// passed to New keeps its own settings; without ContextTimeoutEnabled the
// driver still returns by the deadline (the call goes on in a goroutine,
// bounded by the client's own timeouts, and its outcome is dropped), but
// setting it is cheaper (Diagnose warns when it is off).
//
// Logging. The driver logs to its Locker's logger: Config.Logger, else
// the logger of dlock.WithLogger, else slog.Default(). go-redis's own log
// lines ("failed to dial after 5 attempts", about once a second while a
// dead server is retried) go there too, at Debug level, with the client's
// password hidden, instead of standard error; but go-redis has ONE logger
// per process, not one per client, so they follow the logger of the last
// Locker that set one (any Locker opened from a URL, or given a logger).
// A Locker built by New without a logger leaves go-redis's logger as it
// is, so a program that set its own keeps it.
//
// An outage never reads as "held": the driver reports a holder only when
// Redis itself answered that another token holds the lock (or that the
// queue reserves it); a failed or malformed answer is an error. Errors
// that no retry can cure (NOAUTH, WRONGPASS, NOPERM, a script error,
// WRONGTYPE, CROSSSLOT, an unknown command) are wrapped with
// driver.Permanent so that a wait stops at once. Cleanups that may come
// after a deadline (leaving the queue, undoing a grant the replicas did not
// confirm) run in the background, bounded, and Close waits for them.
//
// # Fencing tokens
//
// Fences come from one counter per server (per hash slot in a Cluster),
// not one per name: fence state is O(1) however many names are used. A
// grant's fence is max(counter + 1, the server's clock in microseconds),
// taken inside the acquire script (Redis TIME), and written back to the
// counter in the same atomic step.
//
// Why a fence never goes backwards. Every grant of a name reads and raises
// the one counter that name maps to (the server's, or its slot's, which
// lives in the name's slot and moves with it), and writes back exactly
// the fence it issues, so while the counter survives each fence is above
// every earlier fence issued from it, hence above every earlier fence of
// the name: sharing a counter between names only makes the steps larger.
// When the counter is lost or rolled back (a restart without persistence,
// FLUSHALL, a failover to a replica that lacked the last writes), the next
// fence is at least the server clock, which is above every fence issued
// before: scripts run one at a time and each takes microseconds, so the
// counter runs ahead of the clock by a few microseconds at most (two
// grants in one microsecond), unless the clock steps back; any loss and
// recovery takes longer than that. The stated assumption is the clock's: the
// clock of the server (or of the replica promoted in its place) never
// steps back by more than the time since the last grant. Fences are large
// numbers (about 1.8e15 in 2027), not 1, 2, 3. ForceRelease and a
// release's hand-off raise the counter the same way.
//
// Migration. Versions before this one kept a counter per name,
// prefix{name}:fence, forever. While such a key exists the acquire takes
// max(legacy + 1, counter + 1, clock), raises the counter to it and
// deletes the legacy key (the fast path's EXISTS includes it, so the
// check costs nothing extra), so no fence goes backwards across the
// upgrade; names never used again keep their legacy key until deleted by
// hand (SCAN MATCH prefix{*}:fence). During a rolling upgrade, an old
// Locker that finds a legacy key already deleted falls back to the clock
// floor: fences still rise, under the clock assumption above.
//
// A Locker warns once per process per server (to its logger) when
// the server has appendonly off: a restart then forgets held locks. The
// driver's Diagnose (dlock doctor) reports that and the other traps:
// appendfsync (everysec can lose the last second of grants in a crash),
// maxmemory-policy (any policy but noeviction can evict lock keys once
// memory is full: lock keys carry a TTL, so volatile-* picks them too),
// replicas without replica_sync, a URL pointing at a replica, cluster
// mode, the server version and the client's ContextTimeoutEnabled.
//
// # Guarantees
//
// On a single server that stays up, this is a correctness lock when work is
// fenced: mutual exclusion holds while leases are refreshed, and a pause
// longer than the TTL is caught by the fence. Redis replication is
// asynchronous: a failover can promote a replica that never received a
// grant, and a second holder can then acquire. Config.ReplicaSync = n closes
// most of that window: a grant, and every refresh, counts only after WAIT
// confirms n replicas have it. A refresh the replicas do not confirm in
// time is an error (not a success), so the watchdog declares the lease
// lost before it could outlive what the replicas know. WAIT does not make
// Redis a consensus system: a failover that picks a replica behind the
// others can still lose a grant. A restart without persistence loses
// every lock.
// Expiry uses the server's clock, and the holder counts its lease from
// before the request was sent, less a drift margin. Without fencing, treat
// it as an efficiency lock.
package redislock
