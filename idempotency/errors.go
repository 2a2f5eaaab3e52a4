package idempotency

import (
	"errors"
	"fmt"
	"time"
)

// ErrInProgress is matched by the error of a Do whose key is claimed by a
// call that has not finished (and, with Config.Wait, did not finish in time).
var ErrInProgress = errors.New("idempotency: a call with this key is in progress")

// ErrClaimLost means this call's claim on the key expired while fn ran
// (the process was paused, or the heartbeat could not reach the database
// for ClaimTTL): another call may have run fn too, and this call's result
// was not stored.
var ErrClaimLost = errors.New("idempotency: claim on the key expired while fn ran")

// InProgressError names the call holding a key. It matches ErrInProgress.
type InProgressError struct {
	Key string
	// Owner is the claimant's description (Config.Owner; default host/pid).
	Owner string
	// Since is when the claimant started.
	Since time.Time
}

// Error names the key, the claimant and its start.
func (e *InProgressError) Error() string {
	return fmt.Sprintf("idempotency: %q is in progress in %s since %s", e.Key, e.Owner, e.Since.UTC().Format(time.RFC3339Nano))
}

// Is reports whether target is ErrInProgress.
func (e *InProgressError) Is(target error) bool { return target == ErrInProgress }
