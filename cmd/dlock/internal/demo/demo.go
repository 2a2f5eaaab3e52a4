package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"
)

// The defaults of the Options durations (the flags of `dlock demo`).
const (
	DefaultTTL         = time.Second
	DefaultWatchdogJob = 20 * time.Second
	DefaultWatchdogTTL = 6 * time.Second
)

// Options configures a demo run.
type Options struct {
	// URL is the backend; "" means a fresh SQLite file in the run's
	// temporary directory (never $DLOCK_URL: the demo must not touch a
	// real lock state unless asked to).
	URL string
	// Scenario is "" (the tour), "all", "list" or a scenario's name.
	Scenario string
	// TTL is the short lease of the pause-based scenarios (DefaultTTL).
	TTL time.Duration
	// WatchdogJob and WatchdogTTL size the watchdog scenario
	// (DefaultWatchdogJob, DefaultWatchdogTTL).
	WatchdogJob time.Duration
	WatchdogTTL time.Duration
	// Keep keeps the demo's temporary directory.
	Keep bool
}

// UsageError is a bad option or argument: the caller's mistake, which no
// retry fixes.
type UsageError struct{ msg string }

func (e *UsageError) Error() string { return e.msg }

func usageErr(format string, args ...any) error {
	return &UsageError{fmt.Sprintf(format, args...)}
}

// Run runs the scenarios opts names, printing their timelines and verdicts
// on out and notes on errOut. It fails when a scenario did not show the
// outcome it teaches; "list" only prints the scenarios.
func Run(ctx context.Context, opts Options, out, errOut io.Writer) error {
	if opts.Scenario == "list" {
		_, err := io.WriteString(out, Catalog())
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
	e, err := newEnv(ctx, &opts, out, errOut)
	if err != nil {
		return err
	}
	defer e.close()
	return e.runAll(ctx, picked)
}

// runAll runs the picked scenarios in turn.
func (e *env) runAll(ctx context.Context, picked []scenario) error {
	failed := 0
	for _, s := range picked {
		if !e.runScenario(ctx, s) {
			failed++
		}
		if ctx.Err() != nil {
			return errors.New("demo interrupted")
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d scenarios did not show the expected outcome", failed, len(picked))
	}
	return nil
}

// runScenario prints the scenario's header, timeline and verdict.
func (e *env) runScenario(ctx context.Context, s scenario) bool {
	e.begin(s)
	verdict, ok, err := s.run(ctx, e)
	e.killAll()
	switch {
	case err != nil:
		fmt.Fprintf(e.out, "verdict: ERROR: %s\n\n", strings.TrimPrefix(errorLine(err), "dlock: "))
		return false
	case !ok:
		fmt.Fprintf(e.out, "verdict: UNEXPECTED: %s\n\n", verdict)
		return false
	}
	fmt.Fprintf(e.out, "verdict: %s\n\n", verdict)
	return true
}

// Catalog is the list of scenarios, one "  name  title" line each.
func Catalog() string {
	var b strings.Builder
	for _, s := range scenarios {
		fmt.Fprintf(&b, "  %-14s %s\n", s.name, s.title)
	}
	return b.String()
}

// Tour is the scenarios Run runs when Options.Scenario is "".
func Tour() []string { return slices.Clone(tour) }

// pick returns the scenarios to run.
func (o *Options) pick() ([]scenario, error) {
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

func (o *Options) validate() error {
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
