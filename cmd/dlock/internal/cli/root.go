// Package cli implements the dlock command: one file per command, each
// built as flags → options struct → run(ctx, opts, std), so that the run
// functions are tested without parsing flags.
package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/cmd/dlock/internal/jobguard"
	"github.com/spf13/cobra"
)

// globalOptions are the flags every command shares.
type globalOptions struct {
	// URL picks the backend; "" means $DLOCK_URL, then the embedded default.
	URL string
}

// Main runs the dlock command with the process's arguments and standard
// streams and returns the exit code.
func Main() int {
	if jobguard.IsGuard() {
		return jobguard.Main()
	}
	// A job's orphans are re-parented to dlock, never to init, so that
	// dlock can kill them if its guard process dies (see dlock run --help).
	_ = jobguard.BecomeSubreaper()
	quietClients()
	return Execute(context.Background(), os.Args[1:], SystemIO())
}

// Execute runs the dlock command with args and returns the exit code. Every
// failure is printed as one line on std.Err.
func Execute(ctx context.Context, args []string, std *IO) int {
	root := newRootCmd(std)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	if isCobraUsage(err) {
		err = exitWith(ExitUsage, err)
	}
	if line := errorLine(err); line != "" {
		fmt.Fprintln(std.Err, line)
	}
	return codeOf(err)
}

func newRootCmd(std *IO) *cobra.Command {
	g := &globalOptions{}
	root := &cobra.Command{
		Use:   "dlock",
		Short: "Run commands under a distributed lock, inspect locks, and see the failure modes live",
		Long: `dlock is a distributed flock: it runs a command while holding a named lock on a
shared backend, refreshes the lease while the command runs, hands the command a
fencing token, and stops it if the lease is lost.

The backend is chosen by --url, else $DLOCK_URL, else the embedded SQLite file
(` + "`$XDG_STATE_HOME/dlock/dlock.db`" + `). URL schemes: redis://, rediss://, redlock://,
postgres://, etcd://, zk://, file://, mem:// (those linked into this binary are listed by
` + "`dlock version`" + `).

Start here: dlock demo`,
		SilenceErrors: true,
		SilenceUsage:  true,
		// Bare `dlock`: the help, on stderr, and the usage exit code.
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.SetOut(std.Err)
			_ = cmd.Help()
			return exitWith(ExitUsage, nil)
		},
	}
	root.SetOut(std.Out)
	root.SetErr(std.Err)
	root.SetIn(std.In)
	root.PersistentFlags().StringVar(&g.URL, "url", "", "backend URL (default $DLOCK_URL, else the embedded file backend)")
	root.SetFlagErrorFunc(flagError)
	root.SetUsageTemplate(root.UsageTemplate() + "\n" + exitCodesHelp + "\n")
	root.AddCommand(
		newRunCmd(g, std), newElectCmd(g, std), newLsCmd(g, std), newInspectCmd(g, std),
		newReleaseCmd(g, std), newMigrateCmd(g, std), newVersionCmd(std),
		newBenchCmd(g, std), newDemoCmd(std), newDemoWorkerCmd(std),
		newDoctorCmd(g, std), newServeCmd(g, std), newRunsCmd(g, std),
	)
	return root
}

// isCobraUsage recognises cobra's own argument errors, which it returns
// as plain errors.
func isCobraUsage(err error) bool {
	var ee *exitError
	if errors.As(err, &ee) {
		return false
	}
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand", "accepts ", "requires at least", "requires at most", "invalid argument"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// args wraps a cobra positional-argument check so that its failure is a
// usage error naming the command's synopsis. A command whose first operand
// is a lock name (its synopsis says NAME) also gets the name checked, so
// that an empty or malformed name is a usage error (exit 2) before any
// backend is opened.
func args(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, a []string) error {
		if err := check(cmd, a); err != nil {
			return usageErr("%v (usage: %s)", err, cmd.UseLine())
		}
		if len(a) > 0 && takesName(cmd.Use) {
			if err := checkName(a[0]); err != nil {
				return usageErr("%v (usage: %s)", err, cmd.UseLine())
			}
		}
		return nil
	}
}

// takesName reports whether a synopsis's first operand is NAME.
func takesName(use string) bool {
	for _, w := range strings.Fields(use)[1:] {
		if !strings.HasPrefix(w, "-") && !strings.HasPrefix(w, "[") {
			return w == "NAME"
		}
	}
	return false
}

// checkName applies dlock's rules for lock names.
func checkName(name string) error {
	if err := dlock.CheckName(name); err != nil {
		return errors.New(strings.TrimPrefix(err.Error(), dlock.ErrInvalidArgument.Error()+": "))
	}
	return nil
}
