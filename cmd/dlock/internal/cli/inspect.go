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

func newInspectCmd(g *globalOptions, std *IO) *cobra.Command {
	opts := &inspectOptions{}
	cmd := &cobra.Command{
		Use:   "inspect NAME",
		Short: "Show who holds a lock, its fence and time left",
		Long: `Show who holds the lock NAME, its fence and its time left.

NAME may also be a semaphore, a read-write lock or an election: every grant
held under it is shown, one row each, with its KIND (permit 2/4 is permit
index 2 of a semaphore of 4; leader is an election's term, whose fence is the
term number and whose owner is the leader's published value).`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			opts.URL, opts.Name = g.URL, a[0]
			return runInspect(cmd.Context(), opts, std)
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, `print a JSON object ({"name":..., "held":false} when free)`)
	return cmd
}

func runInspect(ctx context.Context, opts *inspectOptions, std *IO) error {
	return withLocker(ctx, opts.URL, func(ctx context.Context, l *dlock.Locker) error {
		hs, err := grantsOf(ctx, l, opts.Name)
		if err != nil {
			return err
		}
		return writeInspect(std, opts, hs)
	})
}

// writeInspect prints the grants hs held under opts.Name, or that it is
// free. JSON is one object: the first grant, and when the name is a
// primitive's, every grant in "grants".
func writeInspect(std *IO, opts *inspectOptions, hs []dlock.Holder) error {
	switch {
	case opts.JSON && len(hs) == 0:
		return writeJSON(std.Out, holderRecord{Name: opts.Name})
	case opts.JSON:
		rec := recordOf(hs[0])
		if hs[0].Kind != dlock.KindMutex {
			for _, h := range hs {
				rec.Grants = append(rec.Grants, recordOf(h))
			}
		}
		return writeJSON(std.Out, rec)
	case len(hs) == 0:
		_, err := fmt.Fprintf(std.Out, "%s is free\n", opts.Name)
		return err
	}
	return writeHolderTable(std.Out, hs)
}
