// Package driver defines what a dlock backend implements.
//
// Users never import this package: they use *dlock.Locker and *dlock.Lease.
// A backend implements [Driver] (one attempt, refresh, release, close) and,
// when it can, the optional interfaces in this package. The portable layer
// (package dlock) owns everything else exactly once for every backend:
// validation, retries, backoff, waiting, the watchdog, local expiry and loss
// detection. A driver therefore never retries, never sleeps, and never
// decides that a lease is lost: it reports what its backend said.
//
// Errors: a driver returns [ErrNotHeld] (or [ErrExpired] / [ErrTakenOver],
// which match it) when a token no longer owns a lock, and otherwise returns
// the backend's own error unchanged; the portable layer wraps it once.
package driver

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// ErrNotHeld reports that the token no longer holds the lock (it expired,
// was released, or another holder has it). Refresh and Release return it.
var ErrNotHeld = errors.New("lock not held by this token")

// ErrExpired is ErrNotHeld when the backend knows the lock is simply gone
// (expired or deleted) and nobody else holds it.
var ErrExpired = notHeld("lock expired or was deleted")

// ErrTakenOver is ErrNotHeld when the backend knows another token holds it.
var ErrTakenOver = notHeld("lock is held by another token")

// ErrSessionEnded is ErrNotHeld when the backend session the lock lived
// in has ended (a Postgres advisory lock's connection, an etcd lease).
var ErrSessionEnded = notHeld("the session holding the lock ended")

type notHeldError string

func notHeld(s string) error { return notHeldError(s) }

func (e notHeldError) Error() string        { return string(e) }
func (e notHeldError) Is(target error) bool { return target == ErrNotHeld }

// Request is one attempt to take a lock.
type Request struct {
	// Name is the validated lock name.
	Name string
	// Token is 128 random bits (hex) chosen by the portable layer. It is the
	// same for every attempt of one Acquire call, so an attempt whose reply
	// was lost is recognised by the backend as a grant to this token.
	Token string
	// Owner is a human-readable holder description (default host/pid).
	Owner string
	// TTL is the lease length asked for (already validated).
	TTL time.Duration
}

// Grant is the answer to one attempt.
type Grant struct {
	// Acquired is true when Token now holds the lock (including when it
	// already held it from an earlier attempt whose reply was lost).
	Acquired bool
	// Fence is the grant's fencing token, strictly increasing per name.
	Fence uint64
	// TTL is the lease length the backend actually granted; zero means
	// exactly Request.TTL. A backend that rounds (etcd: whole seconds)
	// reports the rounded value here.
	TTL time.Duration
	// Holder describes the current holder when Acquired is false. A grant
	// with Acquired false and a nil error is a positive answer "held by
	// someone else"; a driver returns it only when the backend said so,
	// never for a lookup that failed (return the error instead).
	Holder Holder
	// Window, when not zero and shorter than the lease's TTL, is how long
	// the backend holds the lock for now: a hand-off to a queued waiter
	// that has yet to show it is alive, so that a waiter that died cannot
	// keep the lock for a whole TTL. The lease counts its expiry from
	// Window (from Since), and its first refresh, due within Window/3,
	// extends it to its TTL; a lease without the watchdog is extended
	// before the acquire returns.
	Window time.Duration
	// Since, when not zero, is when the granted lease's TTL started
	// counting, on this host's monotonic clock: the SENT time of the call
	// that last created or renewed it. A Queuer that keeps a waiter's lease
	// alive while it queues must set it, and so must a driver whose grant
	// rides on a shared lease renewed earlier (etcd); zero means the time
	// the attempt was sent.
	Since time.Time
}

// Holder is what a backend knows about whoever holds a lock.
type Holder struct {
	Name  string
	Owner string
	Fence uint64
	// TTL is the time left; negative when unknown or unbounded
	// (a session-bound lock such as a Postgres advisory lock).
	TTL time.Duration
}

// Driver is the small interface every backend implements.
// All methods are called concurrently and must be safe for that.
type Driver interface {
	// TryAcquire makes exactly one attempt to take req.Name for req.Token.
	// It increments the fence on success, in the same atomic step.
	TryAcquire(ctx context.Context, req Request) (Grant, error)
	// Refresh extends the lock to ttl from now if token still holds it.
	// It must never re-create a lock that is gone; it returns ErrNotHeld
	// (or ErrExpired / ErrTakenOver) instead.
	Refresh(ctx context.Context, name, token string, ttl time.Duration) error
	// Release frees the lock if token holds it, waking waiters where the
	// backend can; ErrNotHeld (or a variant) when token did not hold it.
	Release(ctx context.Context, name, token string) error
	// Close releases the driver's resources. It is called once, after
	// every lease of the Locker has ended.
	Close() error
}

// Notifier is implemented by backends that can tell waiters when a lock may
// have become free (Redis pub/sub, Postgres LISTEN/NOTIFY, etcd watch).
// Without it, waiters poll with jittered backoff bounded by the holder's TTL.
type Notifier interface {
	// Watch subscribes to release notifications for name. The subscription
	// must be active when Watch returns: the portable layer calls Watch, then
	// makes its next attempt, so a release between the two is never missed.
	// The channel receives (non-blocking, coalesced) when name may be free.
	// stop ends the subscription; it is called exactly once.
	Watch(ctx context.Context, name string) (ch <-chan struct{}, stop func(), err error)
}

// Queuer is implemented by backends that queue waiters themselves, fairly
// (etcd: FIFO by revision, each waiter watching only its predecessor).
// When present, the portable layer calls AcquireWait instead of looping on
// TryAcquire. AcquireWait returns when granted, or when ctx is done, in
// which case it must remove its place in the queue and return ctx's error
// with Grant.Holder filled in when the backend positively answered that
// the lock is held. A zero Grant.Holder with ctx's error means the backend
// never answered: the portable layer reports an outage (ErrBackend), never
// a conflict. A driver must never invent a holder for a failed lookup.
type Queuer interface {
	AcquireWait(ctx context.Context, req Request) (Grant, error)
}

// RefreshItem is one lease in a batched refresh.
type RefreshItem struct {
	Name  string
	Token string
	TTL   time.Duration
}

// BatchRefresher is implemented by backends that can refresh many leases in
// one round trip. The watchdog then sends one call per batch instead of one
// per lease. results[i] is the outcome for items[i] (nil, or ErrNotHeld or
// a variant); err is a transport failure for the whole batch.
type BatchRefresher interface {
	RefreshBatch(ctx context.Context, items []RefreshItem) (results []error, err error)
}

// Lister is implemented by backends that can enumerate and inspect holders.
type Lister interface {
	// List returns the held locks whose names start with prefix.
	List(ctx context.Context, prefix string) ([]Holder, error)
	// Inspect returns the holder of name; ok is false when it is free.
	Inspect(ctx context.Context, name string) (h Holder, ok bool, err error)
}

// ForceReleaser is implemented by backends that let an administrator free a
// lock regardless of its token. It must also bump the name's fence, so that
// the next holder's fence is above the evicted one's, and a fence-checking
// resource rejects the evicted holder's writes once the next holder has
// written; it returns the
// holder that was evicted (ok false when the lock was free) and the new
// fence value that now stands between it and the resource.
type ForceReleaser interface {
	ForceRelease(ctx context.Context, name string) (evicted Holder, ok bool, newFence uint64, err error)
}

// Migrator is implemented by backends with a schema to create (Postgres
// lease table). Migrate is idempotent.
type Migrator interface {
	Migrate(ctx context.Context) error
}

// Capabilities describes a backend to the portable layer and to users.
type Capabilities struct {
	// MinTTL is the smallest TTL the backend honours (etcd: 2 s, and whole
	// seconds). Zero means the portable minimum.
	MinTTL time.Duration
	// MinTTLWhy says why MinTTL is what it is and how to lower it, for
	// the error a shorter TTL gets (etcd: "shorter leases are lost during
	// a leader election; a cluster with a shorter --election-timeout can
	// say so with ?election_timeout=").
	MinTTLWhy string
	// TTLGranularity rounds TTLs up to a multiple of it (etcd: 1 s).
	TTLGranularity time.Duration
	// SessionBound is true when the lease ends with a connection/session
	// rather than a TTL (Postgres advisory locks). The TTL then only sets
	// the health-check cadence.
	SessionBound bool
	// ListLag is how long after a grant List may still miss its holder
	// (Postgres advisory mode publishes holder rows lazily); zero means a
	// confirmed grant is listed at once. The portable layer's read-write
	// lock, whose writer finds the readers in a listing, needs zero.
	ListLag time.Duration
	// AdoptWhyNot, for a driver that is not an Adopter, says why it cannot
	// adopt a lease granted to another Locker, for Resume's error
	// (Postgres advisory mode: "the lock is held by the session of the
	// connection that took it").
	AdoptWhyNot string
}

// Describer is implemented by backends whose Capabilities differ from the
// zero value.
type Describer interface {
	Capabilities() Capabilities
}

// SettingsReporter is implemented by drivers that can say which of their
// own settings are in force, by URL query key and in the form a URL gives
// them (durations as Go durations, booleans as true or false): pglock's
// mode and table, redislock's prefix and fair, and so on. Every key a
// driver reads from a URL is reported, given or defaulted, so that a test
// can check that a URL opens with exactly the settings it names.
// Locker.Settings reports them with the portable ones.
type SettingsReporter interface {
	Settings() map[string]string
}

// Opener builds a Driver from a URL; drivers register one per scheme with
// dlock.Register. The URL has already been parsed; secrets in it must never
// appear in returned errors.
type Opener func(ctx context.Context, url string) (Driver, error)

// ReleaseItem is one lease in a batched release.
type ReleaseItem struct {
	Name  string
	Token string
}

// BatchReleaser is implemented by backends that can release many leases in
// one round trip (Locker.Close, ReleaseAll). results[i] is the outcome for
// items[i] (nil, or ErrNotHeld or a variant); err is a transport failure
// for the whole batch. Without it, the portable layer releases one by one,
// concurrently.
type BatchReleaser interface {
	ReleaseBatch(ctx context.Context, items []ReleaseItem) (results []error, err error)
}

// Verdict grades one Finding of a Diagnoser.
type Verdict string

// Verdicts, from harmless to unsafe.
const (
	// VerdictOK: the check passed.
	VerdictOK Verdict = "ok"
	// VerdictWarn: legal, but weaker than it looks or a trap for later
	// (say what breaks and when).
	VerdictWarn Verdict = "warn"
	// VerdictUnsafe: a lock or fencing guarantee does not hold as
	// configured (a restart can lose or reuse fences, a lock key can be
	// evicted, a pooling proxy breaks session-bound locks).
	VerdictUnsafe Verdict = "unsafe"
)

// Finding is one line of a deployment check: what was checked, the
// verdict, what was seen, and the fix.
type Finding struct {
	// Check names what was checked, e.g. "redis persistence".
	Check string `json:"check"`
	// Verdict is ok, warn or unsafe.
	Verdict Verdict `json:"verdict"`
	// Detail is what the backend reported, e.g. "appendonly no, save ''".
	Detail string `json:"detail"`
	// Fix says what to change when the verdict is not ok.
	Fix string `json:"fix,omitempty"`
}

// Diagnoser is implemented by backends that can check their deployment
// against the traps of distributed locking (`dlock doctor`): persistence,
// eviction, replication, commit settings, pooling proxies, schema, member
// health. Diagnose only reads; it never changes the backend. A check that
// cannot run (permission denied) is a Finding with VerdictWarn saying so,
// not an error; err is for an unreachable backend.
type Diagnoser interface {
	Diagnose(ctx context.Context) ([]Finding, error)
}

// ErrPermanent marks a backend error that retrying cannot cure: a missing
// schema, failed authentication, a database that does not exist, a
// permission denied. The portable layer stops waiting at once on such an
// error instead of retrying it until the wait runs out. Drivers wrap with
// Permanent; errors.Is(err, ErrPermanent) tests it.
var ErrPermanent = errors.New("permanent backend error")

// Permanent marks err as permanent (see ErrPermanent), keeping it
// unwrappable to the backend's own error. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanentError{err}
}

type permanentError struct{ err error }

func (e permanentError) Error() string   { return e.err.Error() }
func (e permanentError) Unwrap() []error { return []error{ErrPermanent, e.err} }

// LogSetter is implemented by drivers that log (warnings about a risky
// deployment, their client's reconnect messages). NewLocker calls SetLogger
// once, before any other method, when the user gave dlock.WithLogger;
// without it a driver logs to slog.Default(). A driver logs each distinct
// warning at most once per process and server, never on every call.
type LogSetter interface {
	SetLogger(*slog.Logger)
}

type loggerKey struct{}

// ContextWithLogger returns ctx carrying logger, for an Opener: dlock.Open
// passes the logger of dlock.WithLogger to the driver's Opener this way, so
// that what it logs while opening goes there too.
func ContextWithLogger(ctx context.Context, logger *slog.Logger) context.Context {
	return context.WithValue(ctx, loggerKey{}, logger)
}

// LoggerFrom returns the logger ctx carries (ContextWithLogger), or
// slog.Default().
func LoggerFrom(ctx context.Context) *slog.Logger {
	if l, ok := ctx.Value(loggerKey{}).(*slog.Logger); ok && l != nil {
		return l
	}
	return slog.Default()
}

// MigrationReporter is a Migrator that also says what it changed, for
// `dlock migrate`: the objects it created (e.g. `table dlock_leases`), none
// when the schema was already up to date. It is idempotent like Migrate.
type MigrationReporter interface {
	MigrateReport(ctx context.Context) (created []string, err error)
}

// Eviction is a force-release pushed by a backend: the grant of Name with
// fencing token Fence was ended by an administrator (ForceReleaser).
type Eviction struct {
	Name  string
	Fence uint64
}

// EvictionWatcher is implemented by backends that can push a
// force-release to the evicted holder at once (Redis pub/sub, Postgres
// NOTIFY, an etcd watch). The portable layer subscribes once per Locker
// while it holds leases, and ends a matching lease with "force-released".
// Delivery is best effort: without it, or when an event is dropped, the
// holder learns at its next refresh.
type EvictionWatcher interface {
	// WatchEvictions subscribes to force-releases; the subscription is
	// active when it returns. stop ends it and is called exactly once.
	WatchEvictions(ctx context.Context) (ch <-chan Eviction, stop func(), err error)
}

// SessionWatcher is implemented by backends whose leases live in a
// client-side session that can end on its own (a Postgres advisory lock's
// pinned connection, closed by a server crash or a terminated backend).
// WatchSession arranges for lost to be called, once and on a goroutine of
// its own, when the session holding token's lease ends, and reports
// whether token holds anything (false: lost is never called). The
// portable layer registers it at the grant and ends the lease at once
// (LostSession) instead of at the next refresh. A callback rather than a
// channel: a lease that ends first costs no goroutine waiting on it.
type SessionWatcher interface {
	WatchSession(token string, lost func()) bool
}

// Adopter is implemented by backends on which a Locker can take over a
// lease that another Locker was granted (Locker.Resume): a lease handed
// from a parent process to a worker, or resumed after a restart.
//
// Adopt checks that req.Token still holds req.Name and extends it to
// req.TTL from now, in one token-checked step, as Refresh does; it never
// re-creates a lock that is gone, and returns ErrNotHeld (or ErrExpired /
// ErrTakenOver) instead. On success it returns the grant as the backend
// records it: Acquired true, Fence the grant's fence (unchanged: adopting
// is not a new grant), TTL and Since as for TryAcquire. fence is the
// grant's fence as the lease's handle gives it: a backend that keeps one
// fence per lock returns its own, which the portable layer compares with
// it; one that can only narrow it down (Redlock: a value among the nodes
// that confirm) returns fence when the answers bear it out. req.Owner is
// ignored: the holder keeps the owner it was granted with.
//
// From then on the lease must live exactly as long as the adopting
// driver keeps refreshing it: it must not depend on the Locker,
// connection or session that was granted it (etcd moves the key onto the
// adopter's own lease), nor keep anything else of theirs alive. Without
// Adopter, Locker.Resume fails with errors.ErrUnsupported; a driver that
// can adopt in some modes only returns, in the others, an error wrapping
// errors.ErrUnsupported that says why.
type Adopter interface {
	Adopt(ctx context.Context, req Request, fence uint64) (Grant, error)
}
