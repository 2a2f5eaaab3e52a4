package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/dlockdev/dlock/cmd/dlock/internal/demo"
	"github.com/spf13/cobra"
)

const demoLong = `Run the failure modes of distributed locking live, each with real, separate
processes (this binary re-executed as workers), print what each process did on
a timeline, and a one-line verdict. The exit status is 0 when the outcome is
the one the scenario teaches (even when that outcome is a bug being shown).

Without a SCENARIO, runs the tour: %s. "all" runs every scenario;
"list" prints the scenarios.

Scenarios:
%s
By default the demo uses a fresh temporary SQLite file (file://), never your
real lock state, and ignores $DLOCK_URL; --url runs it on another backend
(redis://, postgres://, ...). Lock names are unique to each run. Protected
resources (counters, registers, billing tables) are SQLite files in the
demo's temporary directory. The naive locks of orphan, stale-release and
billing are implemented on the chosen backend for file://, redis://,
postgres://, etcd:// and zk:// URLs.`

func newDemoCmd(std *IO) *cobra.Command {
	opts := &demo.Options{}
	cmd := &cobra.Command{
		Use:   "demo [SCENARIO|all|list]",
		Short: "See distributed-locking failure modes live, with real processes",
		Long:  fmt.Sprintf(demoLong, strings.Join(demo.Tour(), ", "), demo.Catalog()),
		Args:  args(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			if len(a) == 1 {
				opts.Scenario = a[0]
			}
			return fromDemo(demo.Run(cmd.Context(), *opts, std.Out, std.Err))
		},
	}
	addDemoFlags(cmd, opts)
	return cmd
}

// addDemoFlags registers the flags of `dlock demo`. Its own --url hides the
// global one, whose help would promise the $DLOCK_URL fallback that the
// demo deliberately skips.
func addDemoFlags(cmd *cobra.Command, opts *demo.Options) {
	f := cmd.Flags()
	f.StringVar(&opts.URL, "url", "", "backend to run the demo on (default: a fresh temporary file; $DLOCK_URL is ignored)")
	durationVar(f, &opts.TTL, "ttl", demo.DefaultTTL, "lease TTL of the pause-based scenarios (raised to the backend's minimum)")
	durationVar(f, &opts.WatchdogJob, "watchdog-job", demo.DefaultWatchdogJob, "length of the watchdog scenario's job")
	durationVar(f, &opts.WatchdogTTL, "watchdog-ttl", demo.DefaultWatchdogTTL, "lease TTL of the watchdog scenario")
	f.BoolVar(&opts.Keep, "keep", false, "keep the demo's temporary directory and print its path")
}

// newDemoWorkerCmd is the hidden command that runs one process of a demo
// scenario; `dlock demo` starts it.
func newDemoWorkerCmd(std *IO) *cobra.Command {
	opts := &demo.WorkerOptions{}
	cmd := &cobra.Command{
		Use:    demo.WorkerCommand + " ROLE",
		Short:  "internal: one process of a demo scenario",
		Hidden: true,
		Args:   args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			opts.Role = a[0]
			return fromDemo(demo.RunWorker(cmd.Context(), opts, std.Out))
		},
	}
	opts.AddFlags(cmd)
	return cmd
}

// fromDemo gives the demo's usage errors the usage exit code.
func fromDemo(err error) error {
	var ue *demo.UsageError
	if errors.As(err, &ue) {
		return exitWith(ExitUsage, err)
	}
	return err
}
