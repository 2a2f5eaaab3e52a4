package fence

import (
	"errors"
	"fmt"
	"math"

	"github.com/dlockdev/dlock"
)

// ErrStale is matched (errors.Is) by every rejection of a write whose fence
// is lower than the highest fence the resource has accepted. The writer's
// grant has been superseded: it must stop writing, and must not retry with
// the same fence.
var ErrStale = errors.New("fence: stale fencing token")

// StaleError is the rejection of one write. It matches ErrStale.
type StaleError struct {
	// Key names the resource (a row key, a Redis key, a table).
	Key string
	// Offered is the fence the rejected write carried.
	Offered uint64
	// Current is the highest fence the resource had accepted; zero when
	// the store could not say (a trigger's rejection seen without its
	// detail).
	Current uint64
}

// Error says which fence was offered and which is current.
func (e *StaleError) Error() string {
	if e.Current == 0 {
		return fmt.Sprintf("fence: write to %q with fence %d rejected: a newer grant has written", e.Key, e.Offered)
	}
	return fmt.Sprintf("fence: write to %q with fence %d rejected: fence %d has written since", e.Key, e.Offered, e.Current)
}

// Is reports whether target is ErrStale.
func (e *StaleError) Is(target error) bool { return target == ErrStale }

// Check applies the rule to one write: nil when offered is at least
// current, a *StaleError otherwise. key only labels the error.
func Check(key string, offered, current uint64) error {
	if offered < current {
		return &StaleError{Key: key, Offered: offered, Current: current}
	}
	return nil
}

// Valid reports a fence no store should accept as an error wrapping
// dlock.ErrInvalidArgument: zero (grants start at 1, so zero is almost
// always an unset variable) and, when max is non-zero, values above max
// (SQL stores keep fences in a signed 64-bit column).
func Valid(f, max uint64) error {
	if f == 0 {
		return fmt.Errorf("%w: fence 0: grants start at 1 (was the lease's Fence passed?)", dlock.ErrInvalidArgument)
	}
	if max != 0 && f > max {
		return fmt.Errorf("%w: fence %d exceeds the store's maximum %d", dlock.ErrInvalidArgument, f, max)
	}
	return nil
}

// MaxSQL is the largest fence a SQL store (BIGINT / INTEGER) can hold.
const MaxSQL uint64 = math.MaxInt64
