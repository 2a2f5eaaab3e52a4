package cli

import (
	"context"
	"fmt"

	"github.com/dlockdev/dlock"
	"github.com/spf13/cobra"
)

// inspectOptions configures `dlock inspect`.
type inspectOptions struct {
	URL  string
	Name string
	JSON bool
}

func newInspectCmd(g *globalOptions, io *IO) *cobra.Command {
	opts := &inspectOptions{}
	cmd := &cobra.Command{
		Use:   "inspect NAME",
		Short: "Show who holds a lock, its fence and time left",
		Args:  args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			opts.URL, opts.Name = g.URL, a[0]
			return runInspect(cmd.Context(), opts, io)
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, `print a JSON object ({"name":..., "held":false} when free)`)
	return cmd
}

func runInspect(ctx context.Context, opts *inspectOptions, io *IO) error {
	return withLocker(ctx, opts.URL, func(ctx context.Context, l *dlock.Locker) error {
		h, ok, err := l.Inspect(ctx, opts.Name)
		if err != nil {
			return err
		}
		return writeInspect(io, opts, h, ok)
	})
}

// writeInspect prints the holder h of opts.Name, or that it is free (!ok).
func writeInspect(io *IO, opts *inspectOptions, h dlock.Holder, ok bool) error {
	switch {
	case opts.JSON && !ok:
		return writeJSON(io.Out, holderRecord{Name: opts.Name})
	case opts.JSON:
		return writeJSON(io.Out, recordOf(h))
	case !ok:
		_, err := fmt.Fprintf(io.Out, "%s is free\n", opts.Name)
		return err
	}
	return writeHolderTable(io.Out, []dlock.Holder{h})
}
