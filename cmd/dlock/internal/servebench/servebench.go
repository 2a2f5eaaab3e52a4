// Package servebench measures dlock's HTTP API (package serve) against the
// library it fronts, in one run and one process: it starts a serve.Server
// on a loopback TCP listener, drives it through keep-alive HTTP clients,
// and runs the same workloads on the Locker directly.
//
//   - uncontended: Goroutines workers, each on its own name, acquire
//     (one attempt) and release at once;
//   - contended: Goroutines workers on one name, acquire (waiting),
//     release, pause 1 ms (package benchwork's workloads, for both sides);
//   - streams: SSEStreams leases, each with its events stream open; then
//     half are released (event "released") and half force-released by an
//     admin (event "lost"), and the time from each release request to its
//     stream's event is measured, with the process's goroutines and heap
//     while every stream is open.
//
// `dlock bench --serve` prints its Report.
package servebench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/internal/benchwork"
)

// Defaults of Config.
const (
	DefaultDuration   = 2 * time.Second
	DefaultGoroutines = 16
	DefaultSSEStreams = 1000
	DefaultTTL        = 10 * time.Second
	DefaultWait       = 10 * time.Second
)

// Bounds of Config, so that a typo cannot start an hour-long run or a
// million streams.
const (
	MaxDuration   = 10 * time.Minute
	MaxGoroutines = 1024
	MaxSSEStreams = 20_000
	MaxOps        = 10_000_000
)

// Config configures Run.
type Config struct {
	// URL is the backend, opened with dlock.Open when Locker is nil (the
	// caller imports the drivers) and closed when Run returns. One of URL
	// and Locker is required.
	URL string
	// Locker is the backend when set; the server adds its Hooks to it, so
	// the library workloads run first, on a Locker without them.
	Locker *dlock.Locker
	// Duration is how long each workload runs on each side (default
	// DefaultDuration).
	Duration time.Duration
	// Ops, when positive, replaces Duration by a count: each workload
	// runs Ops operations on each side, whatever the machine's speed, and
	// no wait is cut short. Tests use it.
	Ops int
	// Goroutines is the number of workers of each workload (default
	// DefaultGoroutines).
	Goroutines int
	// SSEStreams is the number of leases held with their events stream
	// open (default DefaultSSEStreams; -1 skips the streams phase).
	SSEStreams int
	// TTL is every lease's TTL (default DefaultTTL). A backend that does
	// not push force-releases reports the loss at the next refresh, a
	// fraction of TTL later.
	TTL time.Duration
	// Wait bounds a contended acquire (default DefaultWait).
	Wait time.Duration
	// SSETimeout bounds the wait for every stream's event (default 60 s,
	// or 3×TTL when longer).
	SSETimeout time.Duration
}

// withDefaults validates c and fills in its defaults.
func (c Config) withDefaults() (Config, error) {
	if c.URL == "" && c.Locker == nil {
		return c, fmt.Errorf("%w: servebench: a backend URL or Locker is required", dlock.ErrInvalidArgument)
	}
	c.Duration = orDefault(c.Duration, DefaultDuration)
	c.Goroutines = orDefault(c.Goroutines, DefaultGoroutines)
	c.SSEStreams = orDefault(c.SSEStreams, DefaultSSEStreams)
	c.TTL = orDefault(c.TTL, DefaultTTL)
	c.Wait = orDefault(c.Wait, DefaultWait)
	c.SSETimeout = orDefault(c.SSETimeout, max(time.Minute, 3*c.TTL))
	var errs []error
	check := func(bad bool, format string, args ...any) {
		if bad {
			errs = append(errs, fmt.Errorf("%w: servebench: "+format, append([]any{dlock.ErrInvalidArgument}, args...)...))
		}
	}
	check(c.Duration < 0 || c.Duration > MaxDuration, "duration %s is outside (0, %s]", c.Duration, MaxDuration)
	check(c.Ops < 0 || c.Ops > MaxOps, "ops %d is outside [0, %d]", c.Ops, MaxOps)
	check(c.Goroutines < 0 || c.Goroutines > MaxGoroutines, "goroutines %d is outside [1, %d]", c.Goroutines, MaxGoroutines)
	check(c.SSEStreams < -1 || c.SSEStreams > MaxSSEStreams, "SSE streams %d is outside [1, %d] (or -1: none)", c.SSEStreams, MaxSSEStreams)
	check(c.TTL < 0, "TTL %s is negative", c.TTL)
	check(c.Wait < 0, "wait %s is negative", c.Wait)
	check(c.SSETimeout < 0, "SSE timeout %s is negative", c.SSETimeout)
	return c, errors.Join(errs...)
}

// budget is each workload's budget on each side.
func (c Config) budget() benchwork.Budget {
	if c.Ops > 0 {
		return benchwork.Count(c.Ops)
	}
	return benchwork.For(c.Duration)
}

// orDefault is v, or def when v is zero.
func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// Run measures the workloads of the package doc on cfg's backend. When a
// phase fails it returns the report so far and the error.
func Run(ctx context.Context, cfg Config) (Report, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return Report{}, err
	}
	l, backend, closeLocker, err := openLocker(ctx, cfg)
	if err != nil {
		return Report{}, err
	}
	defer closeLocker()
	r := Report{Backend: backend, Goroutines: cfg.Goroutines, Duration: cfg.Duration, Ops: cfg.Ops, SSEStreams: max(cfg.SSEStreams, 0)}
	prefix := "servebench-" + randomHex(6) + "-"
	lib := runLibrary(ctx, l, cfg, prefix)
	env, err := startServer(l)
	if err != nil {
		return r, err
	}
	defer env.close()
	api := env.api
	r.Uncontended = compare(runHTTPUncontended(ctx, api, cfg, prefix), lib.uncontended, false)
	r.Contended = compare(runHTTPContended(ctx, api, cfg, prefix), lib.contended, true)
	if err := errors.Join(r.Uncontended.err(), r.Contended.err()); err != nil {
		return r, err
	}
	if cfg.SSEStreams > 0 {
		r.Streams, err = runStreams(ctx, env, cfg, prefix+"sse-")
	}
	return r, err
}

// openLocker returns cfg's Locker, its name for the report, and the
// function that closes it if Run opened it.
func openLocker(ctx context.Context, cfg Config) (*dlock.Locker, string, func(), error) {
	if cfg.Locker != nil {
		return cfg.Locker, cfg.Locker.Backend(), func() {}, nil
	}
	l, err := dlock.Open(ctx, cfg.URL)
	if err != nil {
		return nil, "", nil, fmt.Errorf("servebench: %w", err)
	}
	return l, dlock.Redact(cfg.URL), func() { _ = l.Close() }, nil
}

// randomHex is n random bytes in hex, to make a run's lock names unique.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
