package servebench

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/internal/benchwork"
)

// Name suffixes of the workloads' locks.
const (
	uncontendedHTTP = "uh-"
	uncontendedLib  = "ul-"
	contendedHTTP   = "contended-http"
	contendedLib    = "contended-lib"
)

// library holds the library side's runs.
type library struct {
	uncontended Workload
	contended   Workload
}

// runLibrary runs both workloads on l directly.
func runLibrary(ctx context.Context, l *dlock.Locker, cfg Config, prefix string) library {
	ttl := dlock.WithTTL(cfg.TTL)
	budget := cfg.budget()
	u := withCPU(func() Workload {
		return cycles(benchwork.RunCycles(ctx, budget, cfg.Goroutines, prefix+uncontendedLib,
			benchwork.TryAcquireRelease(l, ttl), benchwork.Stop))
	})
	lockers := slices.Repeat([]*dlock.Locker{l}, cfg.Goroutines)
	c := withCPU(func() Workload {
		return contention(benchwork.RunContended(ctx, budget, benchwork.Contend{Workers: cfg.Goroutines},
			benchwork.Acquire(lockers, prefix+contendedLib, ttl, dlock.WithWait(cfg.Wait))))
	})
	return library{uncontended: u, contended: c}
}

// runHTTPUncontended is the uncontended workload over the API: acquire
// with wait_ms 0 (one attempt, as TryAcquire), then DELETE the lease.
func runHTTPUncontended(ctx context.Context, a *api, cfg Config, prefix string) Workload {
	cycle := func(ctx context.Context, name string) error {
		ls, err := a.acquire(ctx, name, cfg.TTL, 0, "servebench/"+name)
		if err != nil {
			return err
		}
		return a.release(context.WithoutCancel(ctx), ls.ID)
	}
	return withCPU(func() Workload {
		return cycles(benchwork.RunCycles(ctx, cfg.budget(), cfg.Goroutines, prefix+uncontendedHTTP, cycle, benchwork.Stop))
	})
}

// runHTTPContended is the contended workload over the API: every worker
// acquires one name with wait_ms = cfg.Wait.
func runHTTPContended(ctx context.Context, a *api, cfg Config, prefix string) Workload {
	name := prefix + contendedHTTP
	lock := func(ctx context.Context, worker int) (func(context.Context) error, error) {
		ls, err := a.acquire(ctx, name, cfg.TTL, cfg.Wait, fmt.Sprintf("servebench/w%d", worker))
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context) error { return a.release(ctx, ls.ID) }, nil
	}
	return withCPU(func() Workload {
		return contention(benchwork.RunContended(ctx, cfg.budget(), benchwork.Contend{Workers: cfg.Goroutines}, lock))
	})
}

// withCPU runs a workload and adds the process's CPU time per op.
func withCPU(run func() Workload) Workload {
	before, ok := benchwork.ProcessCPU()
	w := run()
	if after, ok2 := benchwork.ProcessCPU(); ok && ok2 && w.Ops > 0 {
		w.CPUPerOp = (after - before) / time.Duration(w.Ops)
	}
	return w
}

// cycles summarises an uncontended run.
func cycles(c benchwork.Cycles) Workload {
	w := Workload{
		Ops: c.N - c.Failed, Failed: c.Failed, Elapsed: c.Elapsed, PerSecond: c.Rate(),
		P50: benchwork.Percentile(c.Latencies, 50), P99: benchwork.Percentile(c.Latencies, 99),
	}
	if c.Err != nil {
		w.Err = c.Err.Error()
	}
	return w
}

// contention summarises a contended run; P50 and P99 are of the waits.
func contention(c *benchwork.Contention) Workload {
	w := Workload{
		Ops: len(c.Waits), Failed: c.Failed, Elapsed: c.Elapsed, PerSecond: c.Rate(),
		P50: benchwork.Percentile(c.Waits, 50), P99: benchwork.Percentile(c.Waits, 99),
		HandoffP50: benchwork.Percentile(c.Handoffs, 50), HandoffP99: benchwork.Percentile(c.Handoffs, 99),
		Violations: c.Violations,
	}
	if c.Err != nil {
		w.Err = c.Err.Error()
	}
	return w
}
