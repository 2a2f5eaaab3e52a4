package dlock

import (
	"fmt"
	"log/slog"
	"math"
	"os"
	"time"
)

// Limits and defaults. Every Option documents how it uses them.
const (
	// DefaultTTL is the lease length when WithTTL is not given. The
	// watchdog refreshes at a third of it, so a crashed holder frees the
	// lock within DefaultTTL while a live one keeps it as long as it runs.
	DefaultTTL = 30 * time.Second
	// DefaultWait bounds Acquire's wait when WithWait is not given.
	DefaultWait = 30 * time.Second
	// MinTTL and MaxTTL bound WithTTL and Lease.Refresh.
	MinTTL = 10 * time.Millisecond
	MaxTTL = 24 * time.Hour
	// MaxNameLen is the longest lock name, in bytes.
	MaxNameLen = 512
	// Forever, given to WithWait, makes Acquire wait without a bound (until
	// granted or ctx is done). It must be asked for explicitly: an
	// unbounded queue of waiters behind a stuck holder is an outage.
	Forever time.Duration = math.MaxInt64
)

// Default backoff between polling attempts while waiting. Waiters on
// backends with notifications (Redis, Postgres lease mode, etcd) are woken
// by the release itself; the backoff is only the fallback.
const (
	DefaultBackoffMin = 5 * time.Millisecond
	DefaultBackoffMax = 500 * time.Millisecond
)

// Option configures an acquire call. Given to NewLocker or Open, options
// become the Locker's defaults; given to Acquire, they override them.
type Option func(*settings)

type settings struct {
	ttl         time.Duration
	wait        time.Duration
	backoffMin  time.Duration
	backoffMax  time.Duration
	owner       string
	autoRefresh bool
	// RunOnce's: rerun a crashed slot, hold at least, slots kept.
	retryCrashed bool
	minHold      time.Duration
	keepRuns     int
	logger       *slog.Logger // Locker-wide; nil means the driver's default
	clock        Clock        // Locker-wide; nil means the host's clock
	err          error        // the first invalid option, reported at use
}

func defaultSettings() settings {
	return settings{
		ttl:         DefaultTTL,
		wait:        DefaultWait,
		backoffMin:  DefaultBackoffMin,
		backoffMax:  DefaultBackoffMax,
		owner:       defaultOwner(),
		autoRefresh: true,
		keepRuns:    DefaultKeepRuns,
	}
}

func defaultOwner() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	return fmt.Sprintf("%s/%d", host, os.Getpid())
}

func (s settings) with(opts []Option) settings {
	for _, o := range opts {
		if o != nil {
			o(&s)
		}
	}
	return s
}

func (s *settings) fail(err error) {
	if s.err == nil {
		s.err = err
	}
}

// WithTTL sets the lease length (default DefaultTTL; MinTTL to MaxTTL).
// Backends with coarser leases round it up (etcd: whole seconds, at least
// one); Lease.TTL reports what was granted.
func WithTTL(ttl time.Duration) Option {
	return func(s *settings) {
		if err := validTTL(ttl); err != nil {
			s.fail(err)
			return
		}
		s.ttl = ttl
	}
}

// WithWait bounds how long Acquire and AcquireAll wait for a held lock
// (default DefaultWait; 0 means one attempt, like TryAcquire; Forever means
// no bound). A negative wait is an invalid argument.
func WithWait(wait time.Duration) Option {
	return func(s *settings) {
		if wait < 0 {
			s.fail(invalid("wait %s is negative (use 0 for one attempt, dlock.Forever for no bound)", wait))
			return
		}
		s.wait = wait
	}
}

// WithBackoff sets the polling backoff while waiting: exponential from min,
// capped at max, each sleep drawn uniformly from [0, current) ("full
// jitter"), and never longer than the holder's remaining TTL. Defaults:
// DefaultBackoffMin, DefaultBackoffMax.
func WithBackoff(min, max time.Duration) Option {
	return func(s *settings) {
		if min <= 0 || max < min {
			s.fail(invalid("backoff min %s, max %s: need 0 < min <= max", min, max))
			return
		}
		s.backoffMin, s.backoffMax = min, max
	}
}

// WithOwner sets the holder description others see in HeldError, listings
// and `dlock ls` (default "host/pid"). At most 256 bytes of printable text,
// not only whitespace.
func WithOwner(owner string) Option {
	return func(s *settings) {
		if blank(owner) && owner != "" {
			s.fail(invalid("owner %s is only whitespace: want a holder description others can read", quoteClip(owner)))
			return
		}
		if owner == "" || len(owner) > 256 || !printable(owner) {
			s.fail(invalid("owner %s: want 1 to 256 bytes of printable UTF-8, without control or bidirectional formatting characters", quoteClip(owner)))
			return
		}
		s.owner = owner
	}
}

// WithRetryCrashed makes RunOnce run a slot again whose runner crashed
// (it started the run, recorded no outcome, and its lease is gone): at
// least once instead of the default at most once. The job never runs
// twice at the same time either way: the rerun holds the lock.
func WithRetryCrashed(on bool) Option {
	return func(s *settings) { s.retryCrashed = on }
}

// WithMinHold makes RunOnce keep the lock at least d after the run
// started, even when the job ended sooner (ShedLock's lockAtLeastFor), for
// schedulers that do not name slots: a second host firing within d finds
// the lock held. 0 (the default) releases at the end of the job; d is at
// most MaxTTL.
func WithMinHold(d time.Duration) Option {
	return func(s *settings) {
		if d < 0 || d > MaxTTL {
			s.fail(invalid("minimum hold %s out of range [0, %s]", d, MaxTTL))
			return
		}
		s.minHold = d
	}
}

// WithKeepRuns sets how many slots of a name the run ledger keeps (default
// DefaultKeepRuns, at most 100000): RunOnce drops older ones as it
// records a new one, so the ledger never grows without bound.
func WithKeepRuns(n int) Option {
	return func(s *settings) {
		if n < 1 || n > 100000 {
			s.fail(invalid("keep %d runs: want 1 to 100000", n))
			return
		}
		s.keepRuns = n
	}
}

// WithAutoRefresh turns the watchdog on or off (default on). With it on,
// the lease is refreshed every TTL/3 and declared lost, closing Done, as soon
// as a refresh is refused or none has been confirmed with a third of the TTL
// left. With it off, the lease simply ends at Expires unless Refresh is
// called: that is how the pause demonstrations show a lease expiring under
// a holder that still believes it holds it.
func WithAutoRefresh(on bool) Option {
	return func(s *settings) { s.autoRefresh = on }
}

// WithLogger sends the Locker's and its driver's log lines (warnings about
// a risky deployment, a backend client's reconnect messages) to logger
// instead of slog.Default(). It is a Locker option: give it to Open or
// NewLocker; given to one Acquire it is an invalid argument. To silence
// them: slog.New(slog.DiscardHandler).
func WithLogger(logger *slog.Logger) Option {
	return func(s *settings) {
		if logger == nil {
			s.fail(invalid("nil logger (for none, use slog.New(slog.DiscardHandler))"))
			return
		}
		s.logger = logger
	}
}
