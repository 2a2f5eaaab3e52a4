package cli

import (
	"context"
	"fmt"

	"github.com/dlockdev/dlock"
	"github.com/spf13/cobra"
)

// lsOptions configures `dlock ls`.
type lsOptions struct {
	URL    string
	Prefix string
	JSON   bool
}

func newLsCmd(g *globalOptions, std *IO) *cobra.Command {
	opts := &lsOptions{}
	cmd := &cobra.Command{
		Use:   "ls [PREFIX]",
		Short: "List held locks (owner, fence, time left)",
		Args:  args(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			opts.URL = g.URL
			if len(a) == 1 {
				opts.Prefix = a[0]
			}
			return runLs(cmd.Context(), opts, std)
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print a JSON array instead of a table")
	return cmd
}

func runLs(ctx context.Context, opts *lsOptions, std *IO) error {
	return withLocker(ctx, opts.URL, func(ctx context.Context, l *dlock.Locker) error {
		hs, err := l.List(ctx, opts.Prefix)
		if err != nil {
			return err
		}
		return writeLs(std, opts, hs)
	})
}

// writeLs prints the holders hs as a table or JSON.
func writeLs(std *IO, opts *lsOptions, hs []dlock.Holder) error {
	if opts.JSON {
		recs := make([]holderRecord, len(hs))
		for i, h := range hs {
			recs[i] = recordOf(h)
		}
		return writeJSON(std.Out, recs)
	}
	if len(hs) == 0 {
		// Said on stderr, so that a script reading stdout sees no rows.
		if opts.Prefix != "" {
			fmt.Fprintf(std.Err, "no locks held with prefix %q\n", opts.Prefix)
		} else {
			fmt.Fprintln(std.Err, "no locks held")
		}
		return nil
	}
	return writeHolderTable(std.Out, hs)
}
