package cli

import (
	"context"
	"fmt"
	"os"

	"github.com/dlockdev/dlock"
	"github.com/spf13/cobra"
)

// electOptions configures `dlock elect`: the options of `dlock run` (its
// wait is the campaign's, forever) and the value the leader publishes.
type electOptions struct {
	runOptions
	// Value is what the leader publishes ("" publishes the owner).
	Value string
}

// electUse is the synopsis of `dlock elect`.
const electUse = "dlock elect [flags] NAME -- COMMAND [ARGS...]"

// electLong is the help of `dlock elect`.
const electLong = `Run COMMAND only while this process is the leader of the election NAME.

dlock campaigns until it is elected (however long that takes), then runs the
command as ` + "`dlock run`" + ` does, with DLOCK_NAME, DLOCK_TERM, DLOCK_FENCE (both the
term number, which strictly increases from leader to leader) and DLOCK_TOKEN
in its environment. The leader publishes --value (default: the owner, host/pid),
which ` + "`dlock ls`" + ` and ` + "`dlock inspect NAME`" + ` show as the leader's owner.

If the term is lost (the lease expired, an admin force-released it, no
refresh could be confirmed in time) the command is stopped exactly as
` + "`dlock run`" + ` stops it (SIGTERM to the whole job, SIGKILL after --grace), and
dlock campaigns again; when elected again it runs the command again, with the
new term. If dlock is killed, its job dies with it (see dlock run --help) and
another campaigner is elected once the term's lease expires (--ttl).

When the command exits by itself, or after a signal that dlock forwarded to
it, dlock resigns (the next campaigner is elected at once) and exits with the
command's exit code, as ` + "`dlock run`" + ` does.`

func newElectCmd(g *globalOptions, std *IO) *cobra.Command {
	opts := &electOptions{}
	cmd := &cobra.Command{
		Use:   "elect [flags] NAME -- COMMAND [ARGS...]",
		Short: "Run a command only while elected leader; campaign again after a loss",
		Long:  electLong,
		Example: `  dlock elect scheduler -- ./scheduler
  dlock elect --value http://10.0.0.7:8080 --ttl 10s api-primary -- ./serve --primary`,
		Args: args(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			opts.setArgs(g.URL, a)
			return runElect(cmd.Context(), opts, std)
		},
	}
	addJobFlags(cmd, &opts.runOptions)
	cmd.Flags().StringVar(&opts.Value, "value", "", "what the leader publishes, e.g. its address (default the owner)")
	return cmd
}

// runElect campaigns, runs the command while leader, and campaigns again
// each time the term is lost, until the command ends by itself.
func runElect(ctx context.Context, opts *electOptions, std *IO) error {
	opts.Wait, opts.ConflictExitCode = dlock.Forever, ExitHeld
	if err := opts.validate(electUse); err != nil {
		return err
	}
	return withJob(ctx, &opts.runOptions, func(l *dlock.Locker, sigs <-chan os.Signal) error {
		e, err := l.Election(opts.Name, opts.lockOptions()...)
		if err != nil {
			_ = l.Close()
			return acquireError(&opts.runOptions, err, nil)
		}
		g := grant{dlock.KindLeader, func(ctx context.Context) (*dlock.Lease, error) {
			return e.Campaign(ctx, opts.Value)
		}}
		for {
			again, err := leadOnce(ctx, l, g, &opts.runOptions, std, sigs)
			if !again {
				return err
			}
		}
	})
}

// leadOnce campaigns and runs the command for one term. again says that
// the term was lost and the command stopped, so dlock should campaign
// again; otherwise the Locker is closed and err is dlock's exit.
func leadOnce(ctx context.Context, l *dlock.Locker, g grant, opts *runOptions, std *IO, sigs <-chan os.Signal) (again bool, err error) {
	lease, err := acquireForRun(ctx, l, opts, g, std, sigs)
	if err != nil {
		_ = l.Close()
		return false, err
	}
	t, err := runTerm(lease, opts, std, sigs)
	if err != nil {
		_, _ = releaseAndClose(l, lease, releaseBudget)
		return false, err
	}
	if t.lost == nil || !t.ended || t.signalled || t.res.Err != nil {
		// The command ended by itself or was told to stop, or the guard
		// never reported its end (only dlock's exit makes the guard kill
		// what is left): end as `dlock run` does.
		return false, finishTerm(l, lease, opts, std, t)
	}
	_, _ = within(t.releaseBudget(), func() error { return lease.Release(context.Background()) })
	fmt.Fprintf(std.Err, "dlock: term %d of %q ended (command exit status %d); campaigning again\n",
		lease.Fence(), opts.Name, exitCode(t.res.Status))
	return true, nil
}
