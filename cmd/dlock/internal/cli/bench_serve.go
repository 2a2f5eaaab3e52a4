package cli

import (
	"context"
	"fmt"

	"github.com/dlockdev/dlock/cmd/dlock/internal/servebench"
)

// runBenchServe measures the HTTP API against the library in one run
// (package servebench).
func runBenchServe(ctx context.Context, opts *benchOptions, std *IO) error {
	if opts.Streams < -1 || opts.Streams > servebench.MaxSSEStreams {
		return usageErr("--streams %d is outside [-1, %d]", opts.Streams, servebench.MaxSSEStreams)
	}
	l, err := openLocker(ctx, opts.URL)
	if err != nil {
		return err
	}
	defer l.Close()
	rep, err := servebench.Run(ctx, servebench.Config{Locker: l, Duration: opts.Duration, Ops: opts.Ops,
		Goroutines: opts.Goroutines, SSEStreams: opts.Streams, TTL: opts.TTL})
	if opts.JSON {
		if jerr := writeJSONLine(std.Out, rep); jerr != nil {
			return jerr
		}
	} else {
		rep.Format(std.Out)
	}
	if err != nil {
		return fmt.Errorf("dlock bench --serve: %w", err)
	}
	return nil
}
