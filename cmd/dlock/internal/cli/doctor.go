package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/driver"
	"github.com/spf13/cobra"
)

// doctorOptions configures `dlock doctor`.
type doctorOptions struct {
	URL  string
	JSON bool
}

func newDoctorCmd(g *globalOptions, std *IO) *cobra.Command {
	opts := &doctorOptions{}
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check a backend's deployment against the traps of distributed locking",
		Long: `Check the backend named by --url against the deployment traps that break
locks or fencing: Redis persistence, eviction and replication; Postgres commit
settings, pooling proxies and schema; etcd member health; a file backend on a
network file system. Each check prints one line: its verdict (ok, warn,
unsafe), what was checked, what was seen, and the fix. doctor only reads; it
never changes the backend.

Exit status: 0 when nothing is unsafe (warnings included), 3 when any check
is unsafe, 1 when the backend cannot be reached or checked, 2 for usage.
A backend that offers no checks says so and exits 0.`,
		Example: `  dlock doctor --url redis://redis.internal:6379
  dlock doctor --url postgres://locks@db/app --json | jq '.findings[] | select(.verdict != "ok")'`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.URL = g.URL
			return runDoctor(cmd.Context(), opts, std)
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print one JSON document instead of lines")
	return cmd
}

// doctorReport is the --json document.
type doctorReport struct {
	URL string `json:"url"` // password redacted
	// Checks is false when the backend offers no checks.
	Checks   bool             `json:"checks"`
	Findings []driver.Finding `json:"findings"`
	Unsafe   int              `json:"unsafe"`
	Warn     int              `json:"warn"`
}

func runDoctor(ctx context.Context, opts *doctorOptions, std *IO) error {
	return withLocker(ctx, opts.URL, func(ctx context.Context, l *dlock.Locker) error {
		rep, err := diagnose(ctx, l, dlock.Redact(effectiveURL(opts.URL)))
		if err != nil {
			return err
		}
		return writeDoctor(std, opts, rep)
	})
}

// diagnose runs the backend's checks, if it offers any, for the report on
// url (password redacted).
func diagnose(ctx context.Context, l *dlock.Locker, url string) (doctorReport, error) {
	rep := doctorReport{URL: url, Findings: []driver.Finding{}}
	fs, err := l.Diagnose(ctx)
	if errors.Is(err, dlock.ErrUnsupported) {
		return rep, probe(ctx, l)
	}
	if err != nil {
		return rep, fmt.Errorf("doctor: cannot check %s: %w", rep.URL, err)
	}
	rep.Checks = true
	rep.Findings = append(rep.Findings, fs...)
	return rep, nil
}

// probe tells an unreachable backend (exit 1) from one that merely offers
// no checks.
func probe(ctx context.Context, l *dlock.Locker) error {
	_, _, err := l.Inspect(ctx, "dlock-doctor-probe")
	if err != nil && !errors.Is(err, dlock.ErrUnsupported) {
		return fmt.Errorf("doctor: %w", err)
	}
	return nil
}

// effectiveURL is the URL doctor checks: --url, else $DLOCK_URL, else the
// embedded default.
func effectiveURL(u string) string {
	if u == "" {
		u = os.Getenv(dlock.EnvURL)
	}
	if u == "" {
		u, _ = dlock.DefaultURL()
	}
	return u
}

// writeDoctor prints the report and picks the exit status.
func writeDoctor(std *IO, opts *doctorOptions, rep doctorReport) error {
	for _, f := range rep.Findings {
		switch f.Verdict {
		case driver.VerdictUnsafe:
			rep.Unsafe++
		case driver.VerdictWarn:
			rep.Warn++
		}
	}
	if opts.JSON {
		if err := writeJSON(std.Out, rep); err != nil {
			return err
		}
	} else {
		writeFindings(std.Out, rep)
	}
	if rep.Unsafe > 0 {
		return exitWith(ExitUnsafe, fmt.Errorf("%s: %d unsafe finding(s); exiting %d", rep.URL, rep.Unsafe, ExitUnsafe))
	}
	return nil
}

func writeFindings(w io.Writer, rep doctorReport) {
	if !rep.Checks {
		fmt.Fprintf(w, "%s: this backend offers no deployment checks\n", schemeOf(rep.URL))
		return
	}
	for _, f := range rep.Findings {
		line := fmt.Sprintf("%-6s %s: %s", f.Verdict, f.Check, f.Detail)
		if f.Fix != "" && f.Verdict != driver.VerdictOK {
			line += " (fix: " + f.Fix + ")"
		}
		fmt.Fprintln(w, line)
	}
}

func schemeOf(rawURL string) string {
	if u, err := url.Parse(rawURL); err == nil && u.Scheme != "" {
		return u.Scheme
	}
	return rawURL
}
