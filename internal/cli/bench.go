package cli

import (
	"context"
	"fmt"
	"os/signal"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

// benchOptions configures `dlock bench`.
type benchOptions struct {
	URL string
	// Duration is how long each workload runs.
	Duration time.Duration
	TTL      time.Duration
	JSON     bool
}

// Bounds of --duration, so that a typo cannot start an hour-long run.
const (
	minBenchDuration = 100 * time.Millisecond
	maxBenchDuration = 10 * time.Minute
)

func newBenchCmd(g *globalOptions, io *IO) *cobra.Command {
	opts := &benchOptions{}
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure a backend: uncontended and contended acquire/release",
		Long: `Run four workloads against the backend, each for --duration:

  uncontended-1, -16, -64   1, 16 or 64 goroutines, each on its own lock name:
                            TryAcquire then Release, as fast as possible
  contended-16              16 goroutines (each with its own connection) on one
                            name: Acquire (waiting), hold 1 ms, Release

and print ops/s (completed acquire+release cycles), acquire latency p50/p99,
handoff p50/p99 (from one holder's release to the next holder's grant),
errors, and mutual-exclusion violations (two holders at once: must be 0).
Lock names are unique to the run (dlock-bench/<random>/...).`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.URL = g.URL
			return runBench(cmd.Context(), opts, io)
		},
	}
	f := cmd.Flags()
	f.DurationVar(&opts.Duration, "duration", 2*time.Second, "how long each workload runs (100ms to 10m)")
	f.DurationVar(&opts.TTL, "ttl", 10*time.Second, "lease TTL used by the workloads")
	f.BoolVar(&opts.JSON, "json", false, "print one JSON record per workload instead of a table")
	return cmd
}

func runBench(ctx context.Context, opts *benchOptions, io *IO) error {
	if opts.Duration < minBenchDuration || opts.Duration > maxBenchDuration {
		return usageErr("--duration %s is outside [%s, %s]", opts.Duration, minBenchDuration, maxBenchDuration)
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	l, err := openLocker(ctx, opts.URL)
	if err != nil {
		return err
	}
	l.Close() // the URL works; each workload opens its own lockers
	var results []benchResult
	for _, w := range benchWorkloads {
		r, err := w.run(ctx, opts)
		if err != nil {
			return err
		}
		if opts.JSON {
			if err := writeJSONLine(io.Out, r); err != nil {
				return err
			}
		}
		results = append(results, r)
	}
	if !opts.JSON {
		return writeBenchTable(io, results)
	}
	return nil
}

func writeBenchTable(io *IO, rs []benchResult) error {
	tw := tabwriter.NewWriter(io.Out, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "WORKLOAD\tOPS/S\tP50 MS\tP99 MS\tHANDOFF P50 MS\tHANDOFF P99 MS\tERRORS\tVIOLATIONS\t")
	for _, r := range rs {
		handoff50, handoff99 := "-", "-"
		if r.Contended {
			handoff50, handoff99 = fmt.Sprintf("%.2f", r.HandoffP50Ms), fmt.Sprintf("%.2f", r.HandoffP99Ms)
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%.2f\t%.2f\t%s\t%s\t%d\t%d\t\n", r.Workload, r.OpsPerSec,
			r.LatencyP50Ms, r.LatencyP99Ms, handoff50, handoff99, r.Errors, r.Violations)
	}
	return tw.Flush()
}
