package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/examples/gocron/gocronlock"
	_ "github.com/dlockdev/dlock/filelock"
	"github.com/go-co-op/gocron/v2"
	"github.com/google/uuid"
)

// reportJob is the name of the every-second job: its lock, and its
// records in the run ledger.
const reportJob = "gocron-example-report"

// onceEachSlot runs the every-second job on both hosts, host-b firing
// o.splay after host-a, until o.slots runs and each host's try at each of
// them, then prints the run ledger.
func onceEachSlot(ctx context.Context, url string, o options, out *printer) error {
	fmt.Fprintf(out.w, "== once per slot: an every-second job on two schedulers, host-b firing %s after host-a ==\n", o.splay)
	every, err := dlock.Every(time.Second)
	if err != nil {
		return err
	}
	start := time.Now().Truncate(time.Second).Add(2 * time.Second) // a slot, in the future
	t := newTally()
	var hosts []*host
	defer func() { closeAll(hosts) }()
	for i, name := range []string{"host-a", "host-b"} {
		h, err := openHost(ctx, url, name)
		if err != nil {
			return err
		}
		hosts = append(hosts, h)
		if err := h.scheduleReport(every, start.Add(time.Duration(i)*o.splay), t, out); err != nil {
			return err
		}
	}
	err = t.until(ctx, func() bool { return t.get("ran") >= o.slots && t.get("ran")+t.get("skipped") >= 2*o.slots })
	for _, h := range hosts {
		err = errors.Join(err, h.sched.Shutdown())
	}
	if err != nil {
		return err
	}
	return printLedger(ctx, hosts[0].dl, out)
}

// host is one "machine": its own dlock Locker and gocron scheduler.
type host struct {
	name  string
	dl    *dlock.Locker
	sched gocron.Scheduler
}

func openHost(ctx context.Context, url, name string) (*host, error) {
	dl, err := dlock.Open(ctx, url, dlock.WithOwner(name))
	if err != nil {
		return nil, err
	}
	return &host{name: name, dl: dl}, nil
}

// closeAll shuts the schedulers down, then closes the Lockers.
func closeAll(hosts []*host) {
	for _, h := range hosts {
		if h.sched != nil {
			_ = h.sched.Shutdown()
		}
		_ = h.dl.Close()
	}
}

// scheduleReport starts h's scheduler with the every-second job, first
// due at start, under a gocronlock.Locker.
func (h *host) scheduleReport(every dlock.Schedule, start time.Time, t *tally, out *printer) error {
	locker, err := gocronlock.NewLocker(h.dl, every)
	if err != nil {
		return err
	}
	if h.sched, err = gocron.NewScheduler(gocron.WithDistributedLocker(locker)); err != nil {
		return err
	}
	report := func() {
		out.say(h.name, "runs the report")
		t.add("ran")
	}
	skipped := gocron.AfterLockError(func(_ uuid.UUID, _ string, err error) {
		out.say(h.name, "skips: %v", err)
		t.add("skipped")
	})
	_, err = h.sched.NewJob(gocron.DurationJob(time.Second), gocron.NewTask(report), gocron.WithName(reportJob),
		gocron.WithStartAt(gocron.WithStartDateTime(start)),
		gocron.WithEventListeners(locker.AfterJobRunsWithError(nil), skipped))
	if err != nil {
		return err
	}
	h.sched.Start()
	return nil
}

func printLedger(ctx context.Context, dl *dlock.Locker, out *printer) error {
	runs, err := dl.Runs(ctx, reportJob)
	if err != nil {
		return err
	}
	fmt.Fprintf(out.w, "run ledger of %q, newest first:\n", reportJob)
	for _, r := range runs {
		fmt.Fprintf(out.w, "  %s\n", r)
	}
	return nil
}
