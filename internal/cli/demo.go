package cli

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
)

// demoOptions configures `dlock demo`.
type demoOptions struct {
	URL      string
	Scenario string
	// TTL is the short lease of the pause-based scenarios.
	TTL time.Duration
	// WatchdogJob and WatchdogTTL size the watchdog scenario.
	WatchdogJob time.Duration
	WatchdogTTL time.Duration
	// Keep keeps the demo's temporary directory.
	Keep bool
}

// scenario is one live demonstration.
type scenario struct {
	name, title string
	// run drives the worker processes and returns the verdict; ok is true
	// when the outcome is the one the scenario teaches.
	run func(ctx context.Context, e *demoEnv) (verdict string, ok bool, err error)
}

// scenarios, in the seed's order.
var scenarios = []scenario{
	{"local-lock", "in-process locks across two processes lose updates", demoLocalLock},
	{"orphan", "a lock without a TTL wedges forever after a crash", demoOrphan},
	{"stale-release", "a plain DEL frees another's lock; the token check does not", demoStaleRelease},
	{"correct", "two processes, one correct lock: no overlap", demoCorrect},
	{"pause", "a lease expires during a SIGSTOP and two processes write", demoPause},
	{"fencing", "the paused holder's stale write is rejected at the resource", demoFencing},
	{"watchdog", "a job longer than its lease keeps it; a killed holder frees it within the TTL", demoWatchdog},
	{"singleton", "two schedulers, one runs the job", demoSingleton},
	{"billing", "naive cron double-charges; the layered fix charges once", demoBilling},
}

// tour is what `dlock demo` runs with no argument (well under 30 s).
var tour = []string{"correct", "pause", "fencing"}

func newDemoCmd(g *globalOptions, io *IO) *cobra.Command {
	opts := &demoOptions{}
	cmd := &cobra.Command{
		Use:   "demo [SCENARIO|all|list]",
		Short: "See distributed-locking failure modes live, with real processes",
		Long: `Run the failure modes of distributed locking live, each with real, separate
processes (this binary re-executed as workers), print what each process did on
a timeline, and a one-line verdict. The exit status is 0 when the outcome is
the one the scenario teaches (even when that outcome is a bug being shown).

Without a SCENARIO, runs the tour: ` + strings.Join(tour, ", ") + `. "all" runs every scenario;
"list" prints the scenarios.

Scenarios:
` + scenarioList() + `
By default the demo uses a fresh temporary SQLite file (file://), never your
real lock state, and ignores $DLOCK_URL; --url runs it on another backend
(redis://, postgres://, ...). Lock names are unique to each run. Protected
resources (counters, registers, billing tables) are SQLite files in the
demo's temporary directory. The naive locks of orphan, stale-release and
billing are implemented on the chosen backend for file://, redis://,
postgres://, etcd:// and zk:// URLs.`,
		Args: args(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			opts.URL = g.URL
			if len(a) == 1 {
				opts.Scenario = a[0]
			}
			return runDemo(cmd.Context(), opts, io)
		},
	}
	f := cmd.Flags()
	f.DurationVar(&opts.TTL, "ttl", time.Second, "lease TTL of the pause-based scenarios (raised to the backend's minimum)")
	f.DurationVar(&opts.WatchdogJob, "watchdog-job", 20*time.Second, "length of the watchdog scenario's job")
	f.DurationVar(&opts.WatchdogTTL, "watchdog-ttl", 6*time.Second, "lease TTL of the watchdog scenario")
	f.BoolVar(&opts.Keep, "keep", false, "keep the demo's temporary directory and print its path")
	return cmd
}

func scenarioList() string {
	var b strings.Builder
	for _, s := range scenarios {
		fmt.Fprintf(&b, "  %-14s %s\n", s.name, s.title)
	}
	return b.String()
}

// pick returns the scenarios to run.
func (o *demoOptions) pick() ([]scenario, error) {
	names := tour
	switch o.Scenario {
	case "":
	case "all":
		return scenarios, nil
	default:
		names = []string{o.Scenario}
	}
	var out []scenario
	for _, n := range names {
		i := slices.IndexFunc(scenarios, func(s scenario) bool { return s.name == n })
		if i < 0 {
			return nil, usageErr("unknown demo scenario %q (want one of: all, list, %s)", n, scenarioNames())
		}
		out = append(out, scenarios[i])
	}
	return out, nil
}

func scenarioNames() string {
	var ns []string
	for _, s := range scenarios {
		ns = append(ns, s.name)
	}
	return strings.Join(ns, ", ")
}

func (o *demoOptions) validate() error {
	switch {
	case o.TTL <= 0 || o.TTL > time.Minute:
		return usageErr("--ttl %s: want more than 0 and at most 1m", o.TTL)
	case o.WatchdogTTL <= 0 || o.WatchdogTTL > time.Hour:
		return usageErr("--watchdog-ttl %s: want more than 0 and at most 1h", o.WatchdogTTL)
	case o.WatchdogJob < o.WatchdogTTL:
		return usageErr("--watchdog-job %s must be at least --watchdog-ttl %s", o.WatchdogJob, o.WatchdogTTL)
	}
	return nil
}

func runDemo(ctx context.Context, opts *demoOptions, io *IO) error {
	if opts.Scenario == "list" {
		_, err := fmt.Fprint(io.Out, scenarioList())
		return err
	}
	if err := opts.validate(); err != nil {
		return err
	}
	picked, err := opts.pick()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	e, err := newDemoEnv(ctx, opts, io)
	if err != nil {
		return err
	}
	defer e.close()
	failed := 0
	for _, s := range picked {
		if !e.runScenario(ctx, s) {
			failed++
		}
		if ctx.Err() != nil {
			return exitWith(ExitError, fmt.Errorf("demo interrupted"))
		}
	}
	if failed > 0 {
		return exitWith(ExitError, fmt.Errorf("%d of %d scenarios did not show the expected outcome", failed, len(picked)))
	}
	return nil
}

// runScenario prints the scenario's header, timeline and verdict.
func (e *demoEnv) runScenario(ctx context.Context, s scenario) bool {
	e.begin(s)
	verdict, ok, err := s.run(ctx, e)
	e.killAll()
	switch {
	case err != nil:
		fmt.Fprintf(e.io.Out, "verdict: ERROR: %s\n\n", strings.TrimPrefix(errorLine(err), "dlock: "))
		return false
	case !ok:
		fmt.Fprintf(e.io.Out, "verdict: UNEXPECTED: %s\n\n", verdict)
		return false
	}
	fmt.Fprintf(e.io.Out, "verdict: %s\n\n", verdict)
	return true
}

// demoDir makes the run's temporary directory.
func demoDir() (string, error) {
	d, err := os.MkdirTemp("", "dlock-demo-")
	if err != nil {
		return "", fmt.Errorf("demo: temporary directory: %w", err)
	}
	return d, nil
}
