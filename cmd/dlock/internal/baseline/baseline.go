// Package baseline sets a backend up for `dlock bench --compare`: dlock's
// Lockers and the code a user would write by hand instead (the baseline),
// each on its own client, instrumented to count the round trips it makes.
//
// A baseline is the strongest a competent user would write: the fewest
// round trips a cycle, scripts loaded once. Contended, it waits every way
// such a user would (poll.go: try again after 100 µs or 1 ms; and the
// backend's own blocking primitive where it has one), and dlock is
// measured against the best of them. One file per backend:
//
//	redis.go     one Lua script per acquire (SET NX PX, INCR of the fence
//	             when taken), one per release (EVALSHA); contended: polls
//	redlock.go   SET NX PX on every node in parallel, majority wins
//	             (redsync's algorithm); contended: polls
//	postgres.go  advisory: pg_try_advisory_lock + pg_advisory_unlock on a
//	             pooled connection; contended: blocking pg_advisory_lock, polls.
//	             lease: one-statement upsert lease + token-checked DELETE;
//	             contended: polls
//	mysql.go     get_lock: GET_LOCK(name, 0) + RELEASE_LOCK on a pinned
//	             pooled connection; contended: blocking GET_LOCK, polls.
//	             lease: one-statement upsert lease (INSERT ... ON DUPLICATE
//	             KEY UPDATE when expired) + token-checked DELETE; contended:
//	             polls, and a poll with backoff
//	etcd.go      concurrency.Mutex on one concurrency.Session; contended:
//	             Mutex.Lock (one Session each), polls of Mutex.TryLock
//	zk.go        an ephemeral node created with the fence's write in one
//	             multi, deleted to release; contended: zk.NewLock (one
//	             connection each), polls
//	file.go      raw SQLite INSERT OR IGNORE + DELETE on the same file;
//	             contended: polls
//
// Round trips are counted where the client lets us listen: a go-redis
// hook, a pgx QueryTracer, gRPC interceptors, the requests written on a
// ZooKeeper connection, the replies read after a write on a MySQL
// connection (never a connection's set-up or keep-alive, nor
// pgx's once-per-connection statement preparation); the embedded SQLite
// file has none. Server time per cycle comes from Redis
// process CPU (INFO cpu), Postgres pg_stat_statements (when loaded) and etcd's
// process CPU metric.
package baseline

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"slices"
	"sync/atomic"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/internal/benchwork"
)

// Target is one backend ready to compare: both sides and the probes.
type Target struct {
	// Backend names the backend and mode: redis, redlock,
	// postgres-advisory, postgres-lease, mysql-get_lock, mysql-lease,
	// etcd, zookeeper or file.
	Backend string
	// Baseline says what the hand-written side does in an uncontended
	// cycle (its Contenders name their ways of waiting).
	Baseline string
	// Dlock and Base are the two sides.
	Dlock, Base Side
	// NewLocker opens a Locker on the dlock side's instrumented client,
	// for workloads of its own (holding many leases).
	NewLocker func(opts ...dlock.Option) (*dlock.Locker, error)
	// ServerTime returns the server's cumulative time spent on commands,
	// as ServerTimeKind says; nil when the backend exposes none.
	ServerTime     func(ctx context.Context) (time.Duration, error)
	ServerTimeKind string
	// Write makes one durable write of the backend's own, the yardstick
	// of a contended handoff (which cannot be shorter than the write that
	// frees the lock); WriteKind says what it is. nil when not measured.
	Write     func(ctx context.Context) error
	WriteKind string

	closers []func()
}

// Side is one way of taking locks: dlock's or the baseline's.
type Side struct {
	// Cycle is one uncontended acquire+release.
	Cycle benchwork.Cycle
	// Contenders are the side's ways of waiting for a contended lock:
	// dlock has one; the baseline has each a user would write (polls, the
	// backend's blocking primitive).
	Contenders []Contender
	// RoundTrips counts the side's client round trips; nil when the
	// backend is embedded and has none.
	RoundTrips *Counter
}

// Contender is one way of waiting for a contended lock.
type Contender struct {
	// Name says how it waits ("blocking pg_advisory_lock", "poll every
	// 1ms").
	Name string
	// Extra marks a way measured for reference only, never the baseline's
	// best (a busy poll: no user would spend a core per waiter).
	Extra bool
	// Contend sets up workers contenders for name (their Lockers,
	// sessions, connections) and returns their Lock and the function that
	// tears them down.
	Contend func(ctx context.Context, workers int, name string) (benchwork.Lock, func(), error)
}

// Counter counts round trips; it is safe for concurrent use.
type Counter struct{ n atomic.Int64 }

// Add counts n more.
func (c *Counter) Add(n int64) { c.n.Add(n) }

// Load is the count so far.
func (c *Counter) Load() int64 { return c.n.Load() }

// Close tears down every client and Locker of the target.
func (t *Target) Close() {
	for i := len(t.closers) - 1; i >= 0; i-- {
		t.closers[i]()
	}
	t.closers = nil
}

// onClose registers fn to run at Close, in reverse order.
func (t *Target) onClose(fn func()) { t.closers = append(t.closers, fn) }

// Open sets up the comparison for the backend at rawURL: ttl is the
// lease length of both sides (dlock's Lockers get it as their default
// TTL). The URL's ttl, wait and owner keys set dlock's defaults as with
// dlock.Open; the driver's own keys (redis fair and prefix, postgres mode
// and table, ...) are honoured, and the rest goes to the client library.
// Errors never contain the URL's password.
func Open(ctx context.Context, rawURL string, ttl time.Duration) (*Target, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("%w: malformed URL %s", dlock.ErrInvalidArgument, dlock.Redact(rawURL))
	}
	opts, u, err := portableKeys(u)
	if err != nil {
		return nil, err
	}
	opts = append(opts, dlock.WithTTL(ttl))
	var t *Target
	switch u.Scheme {
	case "redis", "rediss":
		t, err = openRedis(ctx, u, ttl, opts)
	case "redlock":
		t, err = openRedlock(ctx, u, ttl, opts)
	case "postgres", "postgresql":
		t, err = openPostgres(ctx, u, ttl, opts)
	case "etcd":
		t, err = openEtcd(ctx, u, ttl, opts)
	case "zk":
		t, err = openZooKeeper(ctx, u, opts)
	case "mysql", "mariadb":
		t, err = openMySQL(ctx, u, ttl, opts)
	case "file":
		t, err = openFile(ctx, u, opts)
	default:
		return nil, fmt.Errorf("%w: no hand-written baseline for URL scheme %q (compare knows redis, rediss, redlock, postgres, postgresql, mysql, mariadb, etcd, zk, file)",
			dlock.ErrInvalidArgument, u.Scheme)
	}
	if err != nil {
		return nil, fmt.Errorf("bench: set up %s: %w", dlock.Redact(rawURL), err)
	}
	return t, nil
}

// portableKeys takes dlock's own query keys (ttl, wait, owner) out of u.
func portableKeys(u *url.URL) ([]dlock.Option, *url.URL, error) {
	q := u.Query()
	var opts []dlock.Option
	for _, key := range []string{"ttl", "wait"} {
		if !q.Has(key) {
			continue
		}
		d, err := time.ParseDuration(q.Get(key))
		if err != nil {
			return nil, nil, fmt.Errorf("%w: URL query %s=%q: not a duration like 30s", dlock.ErrInvalidArgument, key, q.Get(key))
		}
		if key == "ttl" {
			opts = append(opts, dlock.WithTTL(d))
		} else {
			opts = append(opts, dlock.WithWait(d))
		}
		q.Del(key)
	}
	if q.Has("owner") {
		opts = append(opts, dlock.WithOwner(q.Get("owner")))
		q.Del("owner")
	}
	v := *u
	v.RawQuery = q.Encode()
	return opts, &v, nil
}

// dlockSide is the dlock side over newLocker: one shared Locker for the
// uncontended cycles, one Locker per contender (as separate processes
// would have), every one on the side's instrumented client.
func (t *Target) dlockSide(newLocker func() (*dlock.Locker, error), rt *Counter) (Side, error) {
	shared, err := newLocker()
	if err != nil {
		return Side{}, err
	}
	t.onClose(func() { _ = shared.Close() })
	return Side{
		Cycle: benchwork.TryAcquireRelease(shared),
		Contenders: []Contender{{Name: "dlock", Contend: dlockContenders(newLocker)},
			{Name: SharedLocker, Extra: true, Contend: sharedContenders(shared)}},
		RoundTrips: rt,
	}, nil
}

// SharedLocker names dlock's second way of contending: the workers share
// one Locker (one pool, one watchdog, one listener), as the goroutines of
// one process would, where the first way gives each worker its own, as
// separate processes have. Measured for reference: the contended ratio
// is the first way's.
const SharedLocker = "dlock, one Locker shared by the workers"

// sharedContenders has every worker wait without bound on l.
func sharedContenders(l *dlock.Locker) func(context.Context, int, string) (benchwork.Lock, func(), error) {
	return func(_ context.Context, workers int, name string) (benchwork.Lock, func(), error) {
		return benchwork.Acquire(slices.Repeat([]*dlock.Locker{l}, workers), name, dlock.WithWait(dlock.Forever)), func() {}, nil
	}
}

// migratedDlockSide creates the schema with a Locker of t.NewLocker and
// sets up the dlock side on t.NewLocker, whose round trips rt counts.
func (t *Target) migratedDlockSide(ctx context.Context, rt *Counter) error {
	l, err := t.NewLocker()
	if err != nil {
		return err
	}
	err = l.Migrate(ctx)
	_ = l.Close()
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	t.Dlock, err = t.dlockSide(func() (*dlock.Locker, error) { return t.NewLocker() }, rt)
	return err
}

// dlockContenders opens one Locker per worker, each waiting without bound.
func dlockContenders(newLocker func() (*dlock.Locker, error)) func(context.Context, int, string) (benchwork.Lock, func(), error) {
	return func(_ context.Context, workers int, name string) (benchwork.Lock, func(), error) {
		ls := make([]*dlock.Locker, 0, workers)
		closeAll := func() {
			for _, l := range ls {
				_ = l.Close()
			}
		}
		for range workers {
			l, err := newLocker()
			if err != nil {
				closeAll()
				return nil, nil, err
			}
			ls = append(ls, l)
		}
		return benchwork.Acquire(ls, name, dlock.WithWait(dlock.Forever)), closeAll, nil
	}
}

// perWorker builds a contended Lock from one lock function per worker,
// made by mk (sessions, connections); cleanups run at teardown.
func perWorker(ctx context.Context, workers int, mk func(ctx context.Context) (benchwork.Lock, func(), error)) (benchwork.Lock, func(), error) {
	locks := make([]benchwork.Lock, 0, workers)
	var cleanups []func()
	teardown := func() {
		for _, c := range cleanups {
			c()
		}
	}
	for range workers {
		l, c, err := mk(ctx)
		if err != nil {
			teardown()
			return nil, nil, err
		}
		locks, cleanups = append(locks, l), append(cleanups, c)
	}
	return func(ctx context.Context, w int) (func(context.Context) error, error) { return locks[w](ctx, w) }, teardown, nil
}

// newToken is 128 random bits in hex, as dlock's own tokens.
func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// keyFor is the baseline's key for a lock name, apart from dlock's.
func keyFor(name string) string { return "dlock-bench-baseline:" + name }
