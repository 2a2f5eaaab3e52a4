package baseline

import (
	"context"
	"fmt"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/internal/benchwork"
)

// LeaseReport is what holding many leases on one Locker cost.
type LeaseReport struct {
	Backend string `json:"backend"`
	// Leases were held HeldSeconds with TTL TTLSeconds (the watchdog
	// refreshes every TTL/3); taking them took AcquireSeconds.
	Leases         int     `json:"leases"`
	TTLSeconds     float64 `json:"ttl_seconds"`
	AcquireSeconds float64 `json:"acquire_seconds"`
	HeldSeconds    float64 `json:"held_seconds"`
	// Refreshes is the lease refreshes the watchdog sent while held,
	// RefreshCalls the driver calls (batches) that carried them.
	Refreshes    int64 `json:"refreshes"`
	RefreshCalls int64 `json:"refresh_calls"`
	// RoundTrips is the client round trips counted while held (nil when
	// the backend is embedded), RoundTripsPerCall per refresh call.
	RoundTrips        *int64   `json:"round_trips"`
	RoundTripsPerCall *float64 `json:"round_trips_per_call"`
	// Lost counts leases lost while held; it must be 0.
	Lost int `json:"lost"`
	// Error, when set, says why the run did not complete (the other
	// fields may then be zero).
	Error string `json:"error,omitempty"`
}

// HoldWorkers is how many goroutines take the leases of HoldLeases.
const HoldWorkers = 16

// HoldLeases takes n leases with ttl on one Locker of t's dlock side,
// holds them for hold and counts the refresh traffic.
func HoldLeases(ctx context.Context, t *Target, n int, hold, ttl time.Duration, prefix string) (LeaseReport, error) {
	l0, err := t.NewLocker()
	if err != nil {
		return LeaseReport{}, err
	}
	rc := benchwork.CountRefreshes(l0.Driver())
	l, err := dlock.NewLocker(rc, dlock.WithTTL(ttl))
	if err != nil {
		return LeaseReport{}, err
	}
	defer func() { _ = l.Close() }()
	var rt0, rt1 int64
	count := func(held bool) {
		if t.Dlock.RoundTrips == nil {
			return
		}
		if held {
			rt0 = t.Dlock.RoundTrips.Load()
		} else {
			rt1 = t.Dlock.RoundTrips.Load()
		}
	}
	h, err := benchwork.Hold{Locker: l, Counter: rc, N: n, Workers: HoldWorkers, Prefix: prefix, For: hold,
		Opts: []dlock.Option{dlock.WithTTL(ttl)}, Mark: count}.Run(ctx)
	if err != nil {
		return LeaseReport{}, fmt.Errorf("hold %d leases: %w", n, err)
	}
	r := LeaseReport{Backend: t.Backend, Leases: h.Leases, TTLSeconds: ttl.Seconds(),
		AcquireSeconds: h.Acquire.Seconds(), HeldSeconds: h.Held.Seconds(),
		Refreshes: h.Refreshes, RefreshCalls: h.Calls, Lost: h.Lost}
	if t.Dlock.RoundTrips != nil {
		n := rt1 - rt0
		r.RoundTrips = &n
		if h.Calls > 0 {
			v := float64(n) / float64(h.Calls)
			r.RoundTripsPerCall = &v
		}
	}
	return r, nil
}
