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
	// Lost counts leases lost while held; it must be 0. FirstLost is the
	// first lost lease's error.
	Lost      int    `json:"lost"`
	FirstLost string `json:"first_lost,omitempty"`
	// HeapBytesPerLease is the client's Go heap in use after every lease
	// was taken minus before, over Leases, each read after a
	// runtime.GC (benchwork.Holding.HeapPerLease).
	HeapBytesPerLease float64 `json:"heap_bytes_per_lease,omitempty"`
	// Ticks is how many watchdog periods the hold lasted, computed as
	// HeldSeconds ÷ (TTLSeconds/3), not counted: a hold of one TTL is 3
	// ticks, in each of which every lease is due for one refresh. RoundTripsPerTick is
	// RoundTrips ÷ Ticks (nil with RoundTrips), what one refresh of every
	// lease costs in client round trips.
	Ticks             float64  `json:"ticks,omitempty"`
	RoundTripsPerTick *float64 `json:"round_trips_per_tick,omitempty"`
	// ReleaseSeconds is how long releasing every lease took after the
	// hold; ReleaseCut says it was cut short at that bound, unfinished.
	ReleaseSeconds float64 `json:"release_seconds,omitempty"`
	ReleaseCut     bool    `json:"release_cut,omitempty"`
	// Error, when set, says why the run did not complete (the other
	// fields may then be zero).
	Error string `json:"error,omitempty"`
}

// HoldWorkers is how many goroutines take the leases of HoldLeases.
const HoldWorkers = 16

// HoldLeases takes n leases with ttl on one Locker of t's dlock side,
// holds them for hold and counts the refresh traffic.
func HoldLeases(ctx context.Context, t *Target, n int, hold, ttl time.Duration, prefix string) (LeaseReport, error) {
	return HoldLeasesWithin(ctx, t, n, hold, ttl, prefix, 0)
}

// HoldLeasesWithin is HoldLeases that also times the release of the
// leases after the hold, cutting it short after releaseWait if positive
// (see benchwork.Hold.ReleaseWait: the driver under the Locker it holds
// them on is then closed).
func HoldLeasesWithin(ctx context.Context, t *Target, n int, hold, ttl time.Duration, prefix string, releaseWait time.Duration) (LeaseReport, error) {
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
		Opts: []dlock.Option{dlock.WithTTL(ttl)}, Mark: count, ReleaseWait: releaseWait}.Run(ctx)
	if err != nil {
		return LeaseReport{}, fmt.Errorf("hold %d leases: %w", n, err)
	}
	r := LeaseReport{Backend: t.Backend, Leases: h.Leases, TTLSeconds: ttl.Seconds(),
		AcquireSeconds: h.Acquire.Seconds(), HeldSeconds: h.Held.Seconds(),
		Refreshes: h.Refreshes, RefreshCalls: h.Calls, Lost: h.Lost, FirstLost: h.FirstLost, HeapBytesPerLease: h.HeapPerLease,
		Ticks: h.Held.Seconds() / (ttl.Seconds() / 3), ReleaseSeconds: h.Release.Seconds(), ReleaseCut: !h.Released}
	if t.Dlock.RoundTrips != nil {
		n := rt1 - rt0
		r.RoundTrips = &n
		r.RoundTripsPerCall = ratio(n, float64(h.Calls))
		r.RoundTripsPerTick = ratio(n, r.Ticks)
	}
	return r, nil
}

// ratio is n/d, or nil when d is not positive.
func ratio(n int64, d float64) *float64 {
	if d <= 0 {
		return nil
	}
	v := float64(n) / d
	return &v
}
