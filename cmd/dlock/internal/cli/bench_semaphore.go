package cli

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/cmd/dlock/internal/benchreport"
	"github.com/dlockdev/dlock/internal/benchwork"
)

// runBenchSemaphore runs opts.Goroutines goroutines, each with its own
// Locker, on one semaphore of opts.Semaphore permits for opts.Duration:
// Acquire (waiting), hold opts.Hold, Release, pause.
func runBenchSemaphore(ctx context.Context, opts *benchOptions, std *IO) error {
	lockers, err := openLockers(ctx, opts, opts.Goroutines)
	defer closeAll(lockers)
	if err != nil {
		return err
	}
	name := "dlock-bench/" + randomHex(4) + "/semaphore"
	sems := make([]*dlock.Semaphore, len(lockers))
	for i, l := range lockers {
		if sems[i], err = l.Semaphore(name, opts.Semaphore); err != nil {
			return err
		}
	}
	cfg := benchwork.Contend{Workers: opts.Goroutines, Hold: opts.Hold, Permits: opts.Semaphore, OnError: benchwork.GoOn}
	c := benchwork.RunContended(ctx, opts.budget(), cfg, benchwork.AcquirePermit(sems, dlock.WithWait(dlock.Forever)))
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("bench interrupted: %w", err)
	}
	r := benchreport.Semaphore{Backend: lockers[0].Backend(), Workload: fmt.Sprintf("semaphore-%d", opts.Semaphore), Permits: opts.Semaphore, Goroutines: opts.Goroutines,
		HoldMs: msOf(opts.Hold), Ops: int64(len(c.Waits)), Seconds: c.Elapsed.Seconds(), OpsPerSec: c.Rate(),
		WaitP50Ms: msOf(benchwork.Percentile(c.Waits, 50)), WaitP99Ms: msOf(benchwork.Percentile(c.Waits, 99)),
		MaxHolders: c.MaxHolders, Errors: int64(c.Failed), Violations: int64(c.Violations)}
	if opts.JSON {
		err = writeJSONLine(std.Out, r)
	} else {
		err = writeSemaphoreTable(std, r)
	}
	if err == nil && r.Violations > 0 {
		err = fmt.Errorf("%d grants exceeded the %d permits", r.Violations, r.Permits)
	}
	return err
}

// openLockers opens n Lockers on opts.URL with opts.TTL; on error the ones
// opened are returned too, for closing.
func openLockers(ctx context.Context, opts *benchOptions, n int) ([]*dlock.Locker, error) {
	lockers := make([]*dlock.Locker, 0, n)
	for range n {
		l, err := openLocker(ctx, opts.URL, dlock.WithTTL(opts.TTL))
		if err != nil {
			return lockers, err
		}
		lockers = append(lockers, l)
	}
	return lockers, nil
}

func closeAll(lockers []*dlock.Locker) {
	for _, l := range lockers {
		l.Close()
	}
}

func writeSemaphoreTable(std *IO, r benchreport.Semaphore) error {
	tw := tabwriter.NewWriter(std.Out, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "WORKLOAD\tGOROUTINES\tHOLD MS\tOPS/S\tWAIT P50 MS\tWAIT P99 MS\tMAX HOLDERS\tERRORS\tVIOLATIONS\t")
	fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.0f\t%.2f\t%.2f\t%d\t%d\t%d\t\n", r.Workload, r.Goroutines, r.HoldMs, r.OpsPerSec,
		r.WaitP50Ms, r.WaitP99Ms, r.MaxHolders, r.Errors, r.Violations)
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(std.Out, "OPS/S: permits granted per second; WAIT: from Acquire to the grant; MAX HOLDERS: most seen at once (at most %d).\n", r.Permits)
	return nil
}
