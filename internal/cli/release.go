package cli

import (
	"context"
	"fmt"

	"github.com/dlockdev/dlock"
	"github.com/spf13/cobra"
)

// releaseOptions configures `dlock release`.
type releaseOptions struct {
	URL   string
	Name  string
	Force bool
}

func newReleaseCmd(g *globalOptions, io *IO) *cobra.Command {
	opts := &releaseOptions{}
	cmd := &cobra.Command{
		Use:   "release --force NAME",
		Short: "Free a wedged lock, whoever holds it, and raise its fence",
		Long: `Free the lock NAME whoever holds it: the administrator's way out of a wedged lock.

The lock's fence is raised at the same time, so once the next holder has
written to a fence-checking resource, every write still carrying the evicted
holder's fence (or a lower one) is rejected there. The evicted holder's own
dlock process notices the loss at its next refresh and stops its command.

--force is required: this takes the lock away from a holder that may be alive.`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			opts.URL, opts.Name = g.URL, a[0]
			return runRelease(cmd.Context(), opts, io)
		},
	}
	cmd.Flags().BoolVar(&opts.Force, "force", false, "required: release regardless of the holder's token")
	return cmd
}

func runRelease(ctx context.Context, opts *releaseOptions, io *IO) error {
	if !opts.Force {
		return usageErr("release takes the lock from whoever holds it; say --force to mean it (dlock release --force %s)", opts.Name)
	}
	return withLocker(ctx, opts.URL, func(ctx context.Context, l *dlock.Locker) error {
		h, ok, fence, err := l.ForceRelease(ctx, opts.Name)
		if err != nil {
			return err
		}
		return writeRelease(io, opts, h, ok, fence)
	})
}

// writeRelease says what the release did: whom it evicted (ok) and the new
// fence.
func writeRelease(io *IO, opts *releaseOptions, h dlock.Holder, ok bool, fence uint64) error {
	if !ok {
		_, err := fmt.Fprintf(io.Out, "%s was not held; its fence is now %d\n", opts.Name, fence)
		return err
	}
	_, err := fmt.Fprintf(io.Out, "released %s, held by %s (fence %d); new fence %d: writes fenced with %d or lower are now rejected by fence-checking resources\n",
		opts.Name, h.Owner, h.Fence, fence, h.Fence)
	return err
}
