package dlock

import (
	"errors"
	"fmt"
	"time"
)

// ErrNotAcquired is returned by Acquire, TryAcquire and AcquireAll when the
// lock is held by someone else and the wait bound ran out (or there was no
// wait). errors.As with a *HeldError tells who holds it.
var ErrNotAcquired = errors.New("dlock: lock not acquired")

// ErrLost is the lease's Err after it was lost: it expired without a
// confirmed refresh, another holder took it over, or the backend became
// unreachable for too long to vouch for it. errors.As with a *LostError says
// which. Work guarded by the lease must stop: another process may hold it.
var ErrLost = errors.New("dlock: lease lost")

// ErrReleased is the lease's Err after Release (or Locker.Close).
var ErrReleased = errors.New("dlock: lease released")

// ErrBackend wraps every failure to talk to the backend (connection
// refused, timeout, authentication, protocol errors). The cause is wrapped
// too, so errors.As reaches the backend client's own error type.
var ErrBackend = errors.New("dlock: backend error")

// ErrInvalidArgument is wrapped by every error caused by bad input: an
// empty or over-long name, a TTL or wait out of range, a malformed URL, a
// nil or closed Locker. The message names the bad value.
var ErrInvalidArgument = errors.New("dlock: invalid argument")

// ErrUnsupported is wrapped when the backend lacks an optional ability
// (listing, force-release, migrations). It is errors.ErrUnsupported.
var ErrUnsupported = errors.ErrUnsupported

// HeldError reports who holds a lock that could not be acquired. It matches
// ErrNotAcquired with errors.Is.
type HeldError struct {
	Holder
	// Waited is how long the caller waited before giving up.
	Waited time.Duration
}

// Error describes the holder as far as the backend knows it.
func (e *HeldError) Error() string {
	return fmt.Sprintf("dlock: %q is held by %s", e.Name, e.Holder.String())
}

// Is reports whether target is ErrNotAcquired.
func (e *HeldError) Is(target error) bool { return target == ErrNotAcquired }

// Loss reasons carried by a *LostError.
const (
	// LostExpired: the lock was gone when the watchdog or Refresh asked
	// (expired on the backend, or deleted from outside).
	LostExpired = "expired"
	// LostTakenOver: another token holds the lock now.
	LostTakenOver = "taken over by another holder"
	// LostUnconfirmed: no refresh could be confirmed in time (backend
	// unreachable or too slow); the lease is given up locally before it
	// can expire on the backend.
	LostUnconfirmed = "no refresh confirmed in time"
	// LostSession: the backend session the lock lived in ended
	// (Postgres connection, etcd lease).
	LostSession = "backend session ended"
	// LostForceReleased: an administrator force-released the lock
	// (Locker.ForceRelease, `dlock release --force`) and the backend
	// pushed the news (driver.EvictionWatcher).
	LostForceReleased = "force-released"
)

// LostError says why a lease was lost. It matches ErrLost with errors.Is.
type LostError struct {
	Name   string
	Fence  uint64
	Reason string
	// Cause is the backend error behind LostUnconfirmed/LostSession, if any.
	Cause error
}

// Error names the lock, the fence and the reason.
func (e *LostError) Error() string {
	s := fmt.Sprintf("dlock: lease on %q (fence %d) lost: %s", e.Name, e.Fence, e.Reason)
	if e.Cause != nil {
		s += ": " + e.Cause.Error()
	}
	return s
}

// Is reports whether target is ErrLost.
func (e *LostError) Is(target error) bool { return target == ErrLost }

// Unwrap returns the backend cause, if any.
func (e *LostError) Unwrap() error { return e.Cause }

// backendError marks err as a backend failure while keeping it unwrappable.
type backendError struct{ err error }

func (e *backendError) Error() string        { return e.err.Error() }
func (e *backendError) Unwrap() []error      { return []error{ErrBackend, e.err} }
func (e *backendError) Is(target error) bool { return target == ErrBackend }

func backend(op, name string, err error) error {
	return fmt.Errorf("dlock: %s %q: %w", op, name, &backendError{err})
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidArgument}, args...)...)
}
