package cli

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/dlockdev/dlock"
)

// runsOptions configures `dlock runs`.
type runsOptions struct {
	URL  string
	Name string
	JSON bool
}

func newRunsCmd(g *globalOptions, std *IO) *cobra.Command {
	opts := &runsOptions{}
	cmd := &cobra.Command{
		Use:   "runs [flags] NAME",
		Short: "List the recorded runs of a scheduled job: who ran each slot, when, and how it ended",
		Long: `List the run ledger of NAME, which dlock run --once-per and --schedule write:
for each slot, newest first, the host that ran it, its fence, when it started and
ended, and how it ended (ok, the command's exit status, a lost lease); a run that
has no outcome is running while its runner holds the lock, and crashed once its
lease is gone. The slots between the oldest kept and now that no host ran are
listed as missed.`,
		Example: `  dlock runs nightly-report
  dlock runs --json nightly-report | jq '.missed'`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			opts.URL, opts.Name = g.URL, a[0]
			return runRuns(cmd.Context(), opts, std)
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print JSON instead of a table")
	return cmd
}

func runRuns(ctx context.Context, opts *runsOptions, std *IO) error {
	if err := checkName(opts.Name); err != nil {
		return usageErr("%v (usage: dlock runs NAME)", err)
	}
	return withLocker(ctx, opts.URL, func(ctx context.Context, l *dlock.Locker) error {
		runs, err := l.Runs(ctx, opts.Name)
		if err != nil {
			return err
		}
		missed := missedSlots(runs, time.Now())
		if opts.JSON {
			return writeJSON(std.Out, runsRecordOf(opts.Name, runs, missed))
		}
		return writeRuns(std, opts.Name, runs, missed)
	})
}

// missedSlots are the slots of the newest run's schedule, from the oldest
// kept, that no host ran and whose time is over (the next one has come).
func missedSlots(runs []dlock.Run, now time.Time) []time.Time {
	if len(runs) == 0 {
		return nil
	}
	s, err := scheduleOf(runs[0].Slot.Schedule)
	if err != nil {
		return nil
	}
	var same []dlock.Run
	for _, r := range runs {
		if r.Slot.Schedule == runs[0].Slot.Schedule {
			same = append(same, r)
		}
	}
	var over []time.Time
	for _, p := range dlock.MissedSlots(s, same, now) {
		if !s.Next(p).After(now) {
			over = append(over, p)
		}
	}
	return over
}

// scheduleOf reads back the schedule a run ledger records: "every D" or a
// crontab expression.
func scheduleOf(name string) (dlock.Schedule, error) {
	if d, ok := strings.CutPrefix(name, "every "); ok {
		period, err := time.ParseDuration(d)
		if err != nil {
			return nil, err
		}
		return dlock.Every(period)
	}
	return parseSchedule(name)
}

// runRecord is a run as `dlock runs --json` prints it.
type runRecord struct {
	Slot    time.Time  `json:"slot"`
	State   string     `json:"state"`
	Owner   string     `json:"owner"`
	Fence   uint64     `json:"fence"`
	Attempt int        `json:"attempt"`
	Started time.Time  `json:"started"`
	Ended   *time.Time `json:"ended,omitempty"`
	Status  string     `json:"status,omitempty"`
}

type runsRecord struct {
	Name     string      `json:"name"`
	Schedule string      `json:"schedule,omitempty"`
	Runs     []runRecord `json:"runs"`
	Missed   []time.Time `json:"missed"`
}

func runsRecordOf(name string, runs []dlock.Run, missed []time.Time) runsRecord {
	rec := runsRecord{Name: name, Runs: []runRecord{}, Missed: missed}
	if missed == nil {
		rec.Missed = []time.Time{}
	}
	for _, r := range runs {
		if rec.Schedule == "" {
			rec.Schedule = r.Slot.Schedule
		}
		rr := runRecord{Slot: r.Slot.Time, State: string(r.State), Owner: r.Owner, Fence: r.Fence,
			Attempt: r.Attempt, Started: r.Started.UTC(), Status: r.Status}
		if !r.Ended.IsZero() {
			e := r.Ended.UTC()
			rr.Ended = &e
		}
		rec.Runs = append(rec.Runs, rr)
	}
	return rec
}

// writeRuns prints the runs as a table, then the missed slots.
func writeRuns(std *IO, name string, runs []dlock.Run, missed []time.Time) error {
	if len(runs) == 0 {
		fmt.Fprintf(std.Err, "no runs recorded for %q\n", name)
		return nil
	}
	tw := tabwriter.NewWriter(std.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SLOT\tSTATE\tOWNER\tFENCE\tSTARTED\tENDED\tSTATUS")
	for _, r := range runs {
		ended := "-"
		if !r.Ended.IsZero() {
			ended = stamp(r.Ended)
		}
		state := string(r.State)
		if r.Attempt > 1 {
			state += fmt.Sprintf(" (attempt %d)", r.Attempt)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", r.Slot, state, r.Owner, r.Fence,
			stamp(r.Started), ended, orDash(r.Status))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, m := range missed {
		fmt.Fprintf(std.Out, "missed: slot %s (no host ran it)\n", m.Format(time.RFC3339Nano))
	}
	return nil
}

// stamp shows a run's time as its one-line description does: UTC, ms.
func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
