package redislock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/internal/rediscore"
	"github.com/redis/go-redis/v9"
)

// prepareTimeout bounds the one-time work of prepare (loading the scripts,
// reading the persistence settings). Failing it is not an error: the
// scripts load on first use and the warning is skipped.
const prepareTimeout = 2 * time.Second

// DefaultReplicaTimeout bounds WAIT when Config.ReplicaSync is set and
// Config.ReplicaTimeout is not.
const DefaultReplicaTimeout = time.Second

// Limits of the Config fields.
const (
	maxPrefix         = 64
	maxReplicaSync    = 64
	minReplicaTimeout = time.Millisecond
	maxReplicaTimeout = time.Minute
)

// Config says where a Locker keeps its locks in Redis and how grants are
// confirmed. The zero value is the defaults (New's); each field names its
// URL query key.
type Config struct {
	// Prefix starts every key and channel (URL key prefix; default
	// "dlock:", also for ""): at most 64 bytes. Lockers that should
	// exclude each other must use the same prefix.
	Prefix string
	// ReplicaSync makes a grant, and every refresh, count only once WAIT
	// confirms that this many replicas have it (URL key replica_sync;
	// default 0: off; at most 64). A grant that reaches fewer replicas
	// within ReplicaTimeout is released and reported as an error, so a
	// failover to a replica cannot forget a lock it never received. It
	// costs a second round trip per grant, and needs a *redis.Client or
	// *redis.ClusterClient.
	ReplicaSync int
	// ReplicaTimeout bounds the WAIT of ReplicaSync (URL key
	// replica_timeout; default DefaultReplicaTimeout, also for 0; from
	// 1ms to 1m).
	ReplicaTimeout time.Duration
	// NoFairQueue turns off the fair queue (URL key fair=false). By
	// default Acquire waits in a first-come first-served queue kept in
	// Redis: under contention each release wakes only the waiter at the
	// head of the queue (and hands it the lock), instead of every waiter
	// racing for it, so handoffs cost one attempt and no waiter starves.
	// A waiter that dies leaves the queue within a few seconds (it stops
	// renewing its place); a lock handed to it meanwhile goes on to the
	// next waiter about a second later, since a hand-off holds only until
	// the waiter confirms it (see the package doc). Lockers
	// without the queue still respect it: they take a free lock only when
	// nobody is queued, and are not woken while waiters queue (they
	// poll), so give every Locker that contends for a name the same
	// setting. Without it, each release wakes the longest waiter of every
	// Locker and they race: cheaper per waiter, but a waiter can lose many
	// races in a row (see the contended benchmarks in the README).
	NoFairQueue bool
	// Logger receives the driver's warnings and go-redis's own log lines
	// (no URL key). Nil means the Locker's logger (dlock.WithLogger), else
	// slog.Default(); a Logger set here wins over the Locker's. go-redis
	// has one logger per process: see Logging in the package doc.
	Logger *slog.Logger
}

// New returns a Locker that keeps its locks on the caller's Redis, through
// client: a *redis.Client, a *redis.ClusterClient (or any go-redis v9
// UniversalClient), with the default Config: it is
// Config{}.Locker(client, opts...). The caller keeps ownership of client:
// Locker.Close does not close it. opts become the Locker's defaults.
func New(client redis.UniversalClient, opts ...dlock.Option) (*dlock.Locker, error) {
	return Config{}.Locker(client, opts...)
}

// Locker returns a Locker on client configured by c. The caller keeps
// ownership of client; opts become the Locker's defaults. A nil client or
// an invalid field is an error wrapping dlock.ErrInvalidArgument.
func (c Config) Locker(client redis.UniversalClient, opts ...dlock.Option) (*dlock.Locker, error) {
	cfg, err := c.resolve()
	if err != nil {
		return nil, err
	}
	if client == nil {
		return nil, errNilClient
	}
	return newLocker(newDriver(client, cfg, false), opts)
}

// Driver returns the bare driver on client, for callers assembling their
// own Locker with dlock.NewLocker. Closing the driver leaves client open.
// Driver loads the scripts and checks persistence at once, so its warning
// goes to c.Logger (or slog.Default), not to a logger given later by
// SetLogger.
func (c Config) Driver(client redis.UniversalClient) (driver.Driver, error) {
	cfg, err := c.resolve()
	if err != nil {
		return nil, err
	}
	if client == nil {
		return nil, errNilClient
	}
	d := newDriver(client, cfg, false)
	d.prepare()
	return d.wrap(), nil
}

var errNilClient = fmt.Errorf("%w: nil redis client (want a *redis.Client or *redis.ClusterClient)", dlock.ErrInvalidArgument)

// config is a validated Config with its defaults filled in.
type config struct {
	prefix         string
	replicas       int
	replicaTimeout time.Duration
	fair           bool
	logger         *slog.Logger // Config.Logger: nil unless set
}

func defaultConfig() config {
	return config{prefix: rediscore.DefaultPrefix, replicaTimeout: DefaultReplicaTimeout, fair: true}
}

// resolve validates c and fills in the defaults.
func (c Config) resolve() (config, error) {
	cfg := defaultConfig()
	switch {
	case len(c.Prefix) > maxPrefix:
		return cfg, fmt.Errorf("%w: redislock.Config.Prefix (URL key prefix) %.16q... is %d bytes, at most %d",
			dlock.ErrInvalidArgument, c.Prefix, len(c.Prefix), maxPrefix)
	case c.ReplicaSync < 0 || c.ReplicaSync > maxReplicaSync:
		return cfg, fmt.Errorf("%w: redislock.Config.ReplicaSync (URL key replica_sync) %d out of range [0, %d]: the number of replicas WAIT must confirm",
			dlock.ErrInvalidArgument, c.ReplicaSync, maxReplicaSync)
	case c.ReplicaTimeout != 0 && (c.ReplicaTimeout < minReplicaTimeout || c.ReplicaTimeout > maxReplicaTimeout):
		return cfg, fmt.Errorf("%w: redislock.Config.ReplicaTimeout (URL key replica_timeout) %s out of range [%s, %s] (0 means %s)",
			dlock.ErrInvalidArgument, c.ReplicaTimeout, minReplicaTimeout, maxReplicaTimeout, DefaultReplicaTimeout)
	}
	if c.Prefix != "" {
		cfg.prefix = c.Prefix
	}
	if c.ReplicaTimeout != 0 {
		cfg.replicaTimeout = c.ReplicaTimeout
	}
	cfg.logger = c.Logger
	cfg.replicas, cfg.fair = c.ReplicaSync, !c.NoFairQueue
	return cfg, nil
}

// coalesceFlushes is how many pipelines of coalesced calls a driver keeps
// in flight at most: two keep the server busy with one while the client
// reads the other's replies. Measured with dlock bench --compare (64
// goroutines on one Locker, 2 cores): one, two, four and eight gave 0.69,
// 0.84, 0.81 and 0.80 of the hand-written lock's cycles, without
// coalescing 0.65; a single goroutine is not slowed by any.
const coalesceFlushes = 2

// redisDriver implements driver.Driver and its optional Notifier,
// BatchRefresher, Lister and ForceReleaser on one go-redis client.
type redisDriver struct {
	client redis.UniversalClient
	// calls sends the acquire, refresh and release scripts that the
	// Locker's goroutines run at the same moment together, pipelined
	// (rediscore.Coalescer).
	calls *rediscore.Coalescer
	owned bool // opened from a URL: Close closes the client
	keys  rediscore.Keys
	cfg   config
	// logger is cfg.logger, else the Locker's (SetLogger), else nil for
	// slog.Default() (log).
	logger atomic.Pointer[slog.Logger]
	// notify is the one pub/sub connection of every waiter (and of
	// WatchEvictions).
	notify *rediscore.Mux
	// cluster: one fence counter per hash slot rather than one per server.
	cluster bool
	// honours: the client returns by its context's deadline on its own
	// (ContextTimeoutEnabled); if not, calls are bounded (deadline.go).
	honours bool
	// workers run the calls of bounded when the client does not honour
	// deadlines.
	workers *workers
	// skew is the server's clock minus this host's, in µs, as the last
	// queued attempt's reply (or the TIME read by New) showed it: the
	// server time in the reply less the time the reply arrived, so at most
	// the true skew, below it by that call's latency. A queued attempt
	// sends its caller's deadline on the server's clock with it
	// (waitDeadline).
	skew atomic.Int64
	// bg tracks best-effort cleanups (leaving a queue, undoing a grant
	// that replicas did not confirm) that run after the call that needed
	// them has returned by its deadline; Close waits for them.
	bg sync.WaitGroup
	// closing is closed when Close begins: cleanups waiting for a call
	// their caller gave up on run at once instead (boundedAfter).
	closing   chan struct{}
	closeOnce sync.Once
	// contention remembers the names attempts found held lately: a queued
	// wait on one listens before it attempts.
	contention *contention
	// inbox is where the queued waiters hear from releases.
	inbox *inbox
}

func newDriver(client redis.UniversalClient, cfg config, owned bool) *redisDriver {
	d := &redisDriver{client: client, owned: owned, keys: rediscore.Keys{Prefix: cfg.prefix}, cfg: cfg}
	d.calls = rediscore.NewCoalescer(client, coalesceFlushes)
	_, d.cluster = client.(*redis.ClusterClient)
	d.honours = honoursDeadlines(client)
	d.workers = newWorkers()
	d.closing = make(chan struct{})
	d.contention = newContention()
	d.notify = rediscore.NewMux(client, nil)
	d.inbox = newInbox(d.keys, d.notify)
	if cfg.logger != nil {
		d.useLogger(cfg.logger)
	}
	return d
}

// prepare is the one-time work after construction (and after SetLogger):
// loading the scripts, and the persistence warning.
func (d *redisDriver) prepare() {
	ctx, cancel := context.WithTimeout(context.Background(), prepareTimeout)
	defer cancel()
	if loadScripts(ctx, d.client) == nil {
		warnPersistence(ctx, d.client, d.log())
		if t, err := d.client.Time(ctx).Result(); err == nil {
			d.sampleSkew(uint64(t.UnixMicro()))
		}
	}
}

// wrap is the driver with the fair queue's Queuer when it is on.
func (d *redisDriver) wrap() driver.Driver {
	if d.cfg.fair {
		return fairDriver{d}
	}
	return d
}

// newLocker wraps d in a Locker, then prepares d: after NewLocker has
// passed the Locker's logger on (SetLogger), so that the warning goes
// there.
func newLocker(d *redisDriver, opts []dlock.Option) (*dlock.Locker, error) {
	l, err := dlock.NewLocker(d.wrap(), opts...)
	if err != nil {
		_ = d.Close()
		return nil, err
	}
	d.prepare()
	return l, nil
}

// Refresh runs the refresh script, which never re-creates a missing lock.
// Under Config.ReplicaSync it keeps the grant's promise: the refresh counts
// only once WAIT confirms the replicas have it, else it is an error.
func (d *redisDriver) Refresh(ctx context.Context, name, token string, ttl time.Duration) error {
	_, err := bounded(ctx, d, func() (struct{}, error) { return struct{}{}, d.refreshOnce(ctx, name, token, ttl) })
	return err
}

func (d *redisDriver) refreshOnce(ctx context.Context, name, token string, ttl time.Duration) error {
	if d.cfg.replicas == 0 {
		return d.refresh(ctx, d.calls, name, token, ttl)
	}
	var held error
	err := d.synced(ctx, d.keys.Lock(name), "refresh of "+strconv.Quote(name), func(c *redis.Conn) error {
		held = d.refresh(ctx, c, name, token, ttl)
		if errors.Is(held, driver.ErrNotHeld) {
			return nil // nothing to confirm: report the loss itself
		}
		return held
	})
	if err != nil {
		return err
	}
	return held
}

func (d *redisDriver) refresh(ctx context.Context, c redis.Scripter, name, token string, ttl time.Duration) error {
	n, err := rediscore.Refresh.Run(ctx, c, []string{d.keys.Lock(name)}, rediscore.Mark(token), ttlMillis(ttl)).Int64()
	if err != nil {
		return rediscore.Classify(err)
	}
	return outcome(n)
}

// Release runs the release script, which also hands the lock to the
// queue's head (provisionally: see handoffLease), or publishes on the
// name's release channel while someone watches it.
func (d *redisDriver) Release(ctx context.Context, name, token string) error {
	_, err := bounded(ctx, d, func() (struct{}, error) { return struct{}{}, d.release(ctx, d.calls, name, token) })
	return err
}

func (d *redisDriver) release(ctx context.Context, c redis.Scripter, name, token string) error {
	ks := d.keys.Set(name, d.cluster)
	keys := []string{ks[1], ks[0], ks[2], ks[3], ks[5], ks[6]} // counter, then releaseKeys(ks)
	n, err := releaseScript.Run(ctx, c, keys, handoffLease.Milliseconds(), rediscore.Mark(token)).Int64Slice()
	if err == nil && len(n) != 1 {
		err = fmt.Errorf("redislock: release answered %d results for one lock", len(n))
	}
	if err != nil {
		return rediscore.Classify(err)
	}
	return outcome(n[0])
}

// releaseKeys are the release script's keys of one lock, from its
// Keys.Set: lock, queue, waiter deadlines, requests, watched mark.
func releaseKeys(set []string) []string {
	return []string{set[0], set[2], set[3], set[5], set[6]}
}

// outcome maps the scripts' 1 / 0 / -1 to nil / ErrExpired / ErrTakenOver.
func outcome(n int64) error {
	switch n {
	case 1:
		return nil
	case 0:
		return driver.ErrExpired
	default:
		return driver.ErrTakenOver
	}
}

// Close stops the release subscription and, when the driver was opened
// from a URL, closes its client.
func (d *redisDriver) Close() error {
	d.closeOnce.Do(func() { close(d.closing) })
	d.bg.Wait()
	err := d.notify.Close()
	if d.owned {
		err = errors.Join(err, d.client.Close())
	}
	d.workers.stop()
	return err
}

var (
	_ driver.Driver          = (*redisDriver)(nil)
	_ driver.Notifier        = (*redisDriver)(nil)
	_ driver.BatchRefresher  = (*redisDriver)(nil)
	_ driver.Lister          = (*redisDriver)(nil)
	_ driver.ForceReleaser   = (*redisDriver)(nil)
	_ driver.BatchReleaser   = (*redisDriver)(nil)
	_ driver.Diagnoser       = (*redisDriver)(nil)
	_ driver.EvictionWatcher = (*redisDriver)(nil)
	_ driver.LogSetter       = (*redisDriver)(nil)
)
