package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/dlockdev/dlock"
	"github.com/spf13/cobra"
)

// releaseOptions configures `dlock release`.
type releaseOptions struct {
	URL   string
	Name  string
	Force bool
	// HasPermit says to free only permit Permit of the semaphore Name, of
	// Permits permits (0: as listed by the permits held now).
	HasPermit bool
	Permit    int
	Permits   int
}

func newReleaseCmd(g *globalOptions, std *IO) *cobra.Command {
	opts := &releaseOptions{}
	cmd := &cobra.Command{
		Use:   "release --force NAME [--permit K [--permits N]]",
		Short: "Free a wedged lock, whoever holds it, and raise its fence",
		Long: `Free the lock NAME whoever holds it: the administrator's way out of a wedged lock.

The lock's fence is raised at the same time, so once the next holder has
written to a fence-checking resource, every write still carrying the evicted
holder's fence (or a lower one) is rejected there; until then such writes
still pass. The evicted holder's own dlock process is told at once on Redis,
Postgres, etcd and the file backend (elsewhere at its next refresh), says
force-released, stops its command and exits 76.

If NAME is an election, its current term is ended the same way (the term
number is its fence) and the next campaigner is elected.

With --permit K, NAME is a semaphore and only its permit K (0 to N-1, as
` + "`dlock ls`" + ` shows it: permit K/N) is freed, and that permit's fence raised.
The semaphore's permit count N is read from the permits held now; when none
is held, give it with --permits N.

--force is required: this takes the lock away from a holder that may be alive.`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			opts.URL, opts.Name = g.URL, a[0]
			opts.HasPermit = cmd.Flags().Changed("permit")
			return runRelease(cmd.Context(), opts, std)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&opts.Force, "force", false, "required: release regardless of the holder's token")
	f.IntVar(&opts.Permit, "permit", 0, "free only this permit (0 to N-1) of the semaphore NAME")
	f.IntVar(&opts.Permits, "permits", 0, "with --permit: the semaphore's permit count (default: as the held permits say)")
	return cmd
}

func runRelease(ctx context.Context, opts *releaseOptions, std *IO) error {
	if !opts.Force {
		return usageErr("release takes the lock from whoever holds it; say --force to mean it (dlock release --force %s)", opts.Name)
	}
	if opts.Permits != 0 && !opts.HasPermit {
		return usageErr("--permits %d goes with --permit K, the permit to free", opts.Permits)
	}
	return withLocker(ctx, opts.URL, func(ctx context.Context, l *dlock.Locker) error {
		h, ok, fence, err := forceRelease(ctx, l, opts)
		if errors.Is(err, dlock.ErrInvalidArgument) {
			return exitWith(ExitUsage, err) // the permit or the permit count
		}
		if err != nil {
			return err
		}
		return writeRelease(std, opts, h, ok, fence)
	})
}

// forceRelease frees the mutex, an election's term, or with --permit one
// permit.
func forceRelease(ctx context.Context, l *dlock.Locker, opts *releaseOptions) (dlock.Holder, bool, uint64, error) {
	if opts.HasPermit {
		return forceReleasePermit(ctx, l, opts)
	}
	hs, err := grantsOf(ctx, l, opts.Name)
	if err != nil || len(hs) == 0 || hs[0].Kind == dlock.KindMutex {
		return l.ForceRelease(ctx, opts.Name)
	}
	switch hs[0].Kind {
	case dlock.KindLeader:
		e, err := l.Election(opts.Name)
		if err != nil {
			return dlock.Holder{}, false, 0, err
		}
		return e.ForceRelease(ctx)
	case dlock.KindPermit, dlock.KindQueue:
		return dlock.Holder{}, false, 0, usageErr("%q is a semaphore: free one permit with --permit K (dlock ls shows permit K/N)", opts.Name)
	}
	return dlock.Holder{}, false, 0, fmt.Errorf("%q is a read-write lock, which release --force cannot free; its grants end at their TTL", opts.Name)
}

// forceReleasePermit frees one permit of the semaphore opts.Name.
func forceReleasePermit(ctx context.Context, l *dlock.Locker, opts *releaseOptions) (dlock.Holder, bool, uint64, error) {
	n := opts.Permits
	if n == 0 {
		var err error
		if n, err = heldPermits(ctx, l, opts); err != nil {
			return dlock.Holder{}, false, 0, err
		}
	}
	sem, err := l.Semaphore(opts.Name, n)
	if err != nil {
		return dlock.Holder{}, false, 0, err
	}
	return sem.ForceRelease(ctx, opts.Permit)
}

// heldPermits is the permit count of the semaphore opts.Name, as its held
// permits record it.
func heldPermits(ctx context.Context, l *dlock.Locker, opts *releaseOptions) (int, error) {
	hs, err := grantsOf(ctx, l, opts.Name)
	if err != nil {
		return 0, err
	}
	if ps := ofKind(hs, dlock.KindPermit); len(ps) > 0 {
		return ps[0].Permits, nil
	}
	return 0, usageErr("no permit of %q is held, so its permit count is unknown; say --permits N to raise permit %d's fence anyway",
		opts.Name, opts.Permit)
}

// writeRelease says what the release did: whom it evicted (ok) and the new
// fence.
func writeRelease(std *IO, opts *releaseOptions, h dlock.Holder, ok bool, fence uint64) error {
	what := opts.Name
	if opts.HasPermit {
		what = fmt.Sprintf("permit %d of %s", opts.Permit, opts.Name)
	}
	if !ok {
		_, err := fmt.Fprintf(std.Out, "%s was not held; its fence is now %d\n", what, fence)
		return err
	}
	// A fence guard rejects a fence only once a newer one has written to
	// it (fence.Check): until the next holder writes, the evicted
	// holder's writes still pass.
	_, err := fmt.Fprintf(std.Out, "released %s, held by %s (fence %d); its fence is now %d: the next holder's fence will be above it, "+
		"and a fence-checking resource rejects writes fenced with %d or lower once a write with a newer fence has reached it\n",
		what, h.Owner, h.Fence, fence, h.Fence)
	return err
}
