package serve

import (
	"fmt"
	"time"

	"github.com/dlockdev/dlock"
)

// Bounds of the wire's durations, in milliseconds. Each is checked on the
// integer the client sent, before it becomes a time.Duration: a product
// past math.MaxInt64 nanoseconds would wrap around (18446744073740 ms is
// 30 ms as a Duration) and the error would name a value never sent.
const (
	// minTTLms and maxTTLms are the library's dlock.MinTTL and
	// dlock.MaxTTL (10 ms and 24 h).
	minTTLms = int64(dlock.MinTTL / time.Millisecond)
	maxTTLms = int64(dlock.MaxTTL / time.Millisecond)
	// maxWaitMs bounds a wait (24 h, the longest lease); -1 asks for no
	// bound at all.
	maxWaitMs = int64(24 * time.Hour / time.Millisecond)
)

// ttlOf converts ttl_ms, refusing a value out of [minTTLms, maxTTLms].
func ttlOf(ms int64) (time.Duration, error) {
	if ms < minTTLms || ms > maxTTLms {
		return 0, fmt.Errorf("%w: ttl_ms %d is out of range: want %d to %d (dlock.MinTTL to dlock.MaxTTL)",
			dlock.ErrInvalidArgument, ms, minTTLms, maxTTLms)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// waitOf converts wait_ms: 0 is one try, -1 no bound (dlock.Forever).
func waitOf(ms int64) (time.Duration, error) {
	switch {
	case ms == -1:
		return dlock.Forever, nil
	case ms < 0 || ms > maxWaitMs:
		return 0, fmt.Errorf("%w: wait_ms %d: want 0 (one try) to %d (24 h), or -1 (no bound)",
			dlock.ErrInvalidArgument, ms, maxWaitMs)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// options turns the wire's ttl_ms, wait_ms and owner into Options.
func options(ttl, wait *int64, owner string) ([]dlock.Option, error) {
	var opts []dlock.Option
	if ttl != nil {
		d, err := ttlOf(*ttl)
		if err != nil {
			return nil, err
		}
		opts = append(opts, dlock.WithTTL(d))
	}
	if wait != nil {
		d, err := waitOf(*wait)
		if err != nil {
			return nil, err
		}
		opts = append(opts, dlock.WithWait(d))
	}
	if owner != "" {
		opts = append(opts, dlock.WithOwner(owner))
	}
	return opts, nil
}
