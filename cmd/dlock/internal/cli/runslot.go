package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	"github.com/spf13/cobra"

	"github.com/dlockdev/dlock"
)

// slotOptions are the options of `dlock run` for a scheduled job: once per
// slot of a period or a crontab schedule, and the lock's minimum hold.
type slotOptions struct {
	// OncePer is the period of --once-per; OncePerSet says it was given.
	OncePer    time.Duration
	OncePerSet bool
	// Schedule is --schedule, a crontab expression.
	Schedule     string
	RetryCrashed bool
	// MinHold keeps the lock at least this long after the start.
	MinHold  time.Duration
	KeepRuns int
}

// slotHelp is appended to the help of `dlock run`.
const slotHelp = `

Once per schedule slot (--once-per DURATION or --schedule 'CRON EXPR'): put the
same line in every host's crontab, and each slot runs once, on the host that
claims it first, however fast the job and however late a host fires. A run
belongs to the slot nearest the host's clock when dlock starts: for --once-per,
the multiples of the period since the Unix epoch (UTC); for --schedule, the
expression's fire times (the crontab's expression, in the host's time zone, or
CRON_TZ=Zone before it). The host's clock names the slot because the host's
cron fires by it: a host whose clock is off fires early or late by the same
amount and still names its slot; what must stay under half the gap between two
slots is the delay between the firing and dlock's start. Every other host that
arrives for the same slot — while the job runs or long after — does not run it,
prints who ran it, its fence, when and how it ended, and exits with
--conflict-exit-code (75). The backend keeps the record (dlock runs NAME lists
it, with the slots no host ran). A host killed mid-run leaves a crashed run: the
slot is not run again (at most once) unless --retry-crashed, which runs it once
more when the lease is gone (at least once). --min-hold keeps the lock at least
that long after the start even if the job ended sooner (ShedLock's
lockAtLeastFor), with or without a slot.`

// addSlotFlags registers the scheduled-job flags of `dlock run`.
func addSlotFlags(cmd *cobra.Command, o *slotOptions) {
	f := cmd.Flags()
	f.Var(&periodFlag{o}, "once-per", "run once per slot of this period (the multiples of it since the Unix epoch)")
	f.StringVar(&o.Schedule, "schedule", "", "run once per fire time of this crontab expression (e.g. '0 2 * * *')")
	f.BoolVar(&o.RetryCrashed, "retry-crashed", false, "with a slot: run a slot again whose runner crashed (at least once, not at most once)")
	durationVar(f, &o.MinHold, "min-hold", 0, "keep the lock at least this long after the start, even if the command ended sooner")
	f.IntVar(&o.KeepRuns, "keep-runs", dlock.DefaultKeepRuns, "with a slot: how many slots of NAME the backend's run ledger keeps")
}

// periodFlag is --once-per: a duration, and whether it was given.
type periodFlag struct{ o *slotOptions }

func (p *periodFlag) String() string {
	if p.o == nil || !p.o.OncePerSet {
		return ""
	}
	return p.o.OncePer.String()
}

func (p *periodFlag) Set(s string) error {
	if err := (durationFlag{&p.o.OncePer}).Set(s); err != nil {
		return err
	}
	p.o.OncePerSet = true
	return nil
}

func (p *periodFlag) Type() string { return "duration" }

// validate checks the scheduled-job flags; permits is --permits.
func (o *slotOptions) validate(permits int) error {
	slotted := o.OncePerSet || o.Schedule != ""
	switch {
	case o.OncePerSet && o.OncePer <= 0:
		return usageErr("--once-per %s is not a positive period (e.g. --once-per 1h)", o.OncePer)
	case o.OncePerSet && o.Schedule != "":
		return usageErr("--once-per and --schedule both name the slots: give one")
	case slotted && permits > 0:
		return usageErr("--once-per and --schedule run one job per slot; --permits runs several at once: give one or the other")
	case o.RetryCrashed && !slotted:
		return usageErr("--retry-crashed goes with --once-per or --schedule")
	case o.MinHold < 0 || o.MinHold > dlock.MaxTTL:
		return usageErr("--min-hold %s is not from 0 to %s", o.MinHold, dlock.MaxTTL)
	case slotted && (o.KeepRuns < 1 || o.KeepRuns > 100000):
		return usageErr("--keep-runs %d is not from 1 to 100000", o.KeepRuns)
	case !slotted && o.KeepRuns != 0 && o.KeepRuns != dlock.DefaultKeepRuns:
		return usageErr("--keep-runs goes with --once-per or --schedule")
	}
	if o.Schedule != "" {
		if _, err := parseSchedule(o.Schedule); err != nil {
			return usageErr("--schedule %q: %v", o.Schedule, err)
		}
	}
	return nil
}

// parseSchedule reads a crontab expression (five fields, a descriptor
// such as @daily, or either after CRON_TZ=Zone) with robfig/cron.
func parseSchedule(expr string) (cron.Schedule, error) {
	s, err := cron.ParseStandard(expr)
	if err != nil {
		return nil, errors.New(strings.TrimPrefix(err.Error(), "failed to parse "))
	}
	return s, nil
}

// slot returns the slot a run starting now belongs to; ok is false
// without --once-per or --schedule.
func (o *slotOptions) slot(now time.Time) (dlock.Slot, bool, error) {
	var s dlock.Schedule
	switch {
	case o.OncePerSet:
		e, err := dlock.Every(o.OncePer)
		if err != nil {
			return dlock.Slot{}, false, err
		}
		s = e
	case o.Schedule != "":
		c, err := parseSchedule(o.Schedule)
		if err != nil {
			return dlock.Slot{}, false, err
		}
		s = c
	default:
		return dlock.Slot{}, false, nil
	}
	slot, err := dlock.SlotAt(s, o.Schedule, now)
	return slot, err == nil, err
}

// options are the library options of a slot's claim.
func (o *slotOptions) options() []dlock.Option {
	return []dlock.Option{dlock.WithRetryCrashed(o.RetryCrashed), dlock.WithKeepRuns(o.KeepRuns)}
}

// claimSlot claims the slot for lease; a slot another run has is the
// conflict exit, naming that run.
func claimSlot(ctx context.Context, l *dlock.Locker, lease *dlock.Lease, opts *runOptions, slot dlock.Slot) (*dlock.Run, error) {
	r, err := l.ClaimSlot(ctx, lease, slot, opts.Slots.options()...)
	if err != nil {
		return nil, slotError(opts, err)
	}
	return &r, nil
}

// slotError turns a taken slot into the conflict exit; other errors pass.
func slotError(opts *runOptions, err error) error {
	var taken *dlock.SlotTakenError
	if errors.As(err, &taken) {
		return exitWith(opts.ConflictExitCode, fmt.Errorf("%q: %s; not running the command (exit %d)",
			opts.Name, taken.Run, opts.ConflictExitCode))
	}
	return err
}

// slotOfHeld says, for a lock held elsewhere, which run has the slot, if
// the ledger records one.
func slotOfHeld(ctx context.Context, l *dlock.Locker, opts *runOptions, slot dlock.Slot) error {
	runs, err := l.Runs(ctx, opts.Name)
	if err != nil {
		return nil
	}
	for _, r := range runs {
		if r.Slot.Time.Equal(slot.Time) {
			return slotError(opts, &dlock.SlotTakenError{Run: r})
		}
	}
	return nil
}

// afterJob runs once the command has ended and before the lease is
// released: it keeps the lock until --min-hold after the start (unless
// the lease is lost or a signal comes), then records the slot's outcome.
// It gives up after budget: the release must not wait on a silent backend.
func afterJob(l *dlock.Locker, lease *dlock.Lease, opts *runOptions, run *dlock.Run, t term, started time.Time, sigs <-chan os.Signal) {
	if t.lost == nil && !t.signalled && opts.Slots.MinHold > 0 {
		hold := time.NewTimer(time.Until(started.Add(opts.Slots.MinHold)))
		select {
		case <-hold.C:
		case <-lease.Done():
		case <-sigs:
		}
		hold.Stop()
	}
	if run == nil {
		return
	}
	var jobErr error
	switch {
	case t.res.Err != nil:
		jobErr = t.res.Err
	case exitCode(t.res.Status) != 0:
		jobErr = fmt.Errorf("exit status %d", exitCode(t.res.Status))
	}
	_, _ = within(t.releaseBudget(), func() error {
		_, err := l.FinishRun(context.Background(), lease, *run, jobErr)
		return err
	})
}
