package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlockdev/dlock/examples/gocron/gocronlock"
	"github.com/go-co-op/gocron/v2"
)

// election is the name of the schedulers' election.
const election = "gocron-example-leader"

// leaderOnly runs a job every 200 ms on both hosts under a
// gocronlock.Elector: the leader runs o.ticks of it, its dlock Locker
// closes, and the other host runs o.ticks.
func leaderOnly(ctx context.Context, url string, o options, out *printer) error {
	fmt.Fprintln(out.w, "== leader only: a job every 200ms on two schedulers, each with an Elector ==")
	t := newTally()
	var hosts []*host
	var electors []*gocronlock.Elector
	defer func() {
		closeAll(hosts)
		for _, e := range electors {
			_ = e.Close()
		}
	}()
	for _, name := range []string{"host-a", "host-b"} {
		h, err := openHost(ctx, url, name)
		if err != nil {
			return err
		}
		hosts = append(hosts, h)
		e, err := h.scheduleTick(t, out)
		if err != nil {
			return err
		}
		electors = append(electors, e)
	}
	if err := t.until(ctx, func() bool { return t.get("host-a") >= o.ticks || t.get("host-b") >= o.ticks }); err != nil {
		return err
	}
	leader, next := hosts[0], hosts[1]
	if t.get("host-b") >= o.ticks {
		leader, next = next, leader
	}
	out.say(leader.name, "closes its dlock Locker (its term ends)")
	if err := leader.dl.Close(); err != nil {
		return err
	}
	err := t.until(ctx, func() bool { return t.get(next.name) >= o.ticks })
	for _, h := range hosts {
		err = errors.Join(err, h.sched.Shutdown())
	}
	return err
}

// scheduleTick starts h's scheduler with a job every 200 ms, run only
// while h's Elector leads.
func (h *host) scheduleTick(t *tally, out *printer) (*gocronlock.Elector, error) {
	elector, err := gocronlock.NewElector(h.dl, election, h.name)
	if err != nil {
		return nil, err
	}
	if h.sched, err = gocron.NewScheduler(gocron.WithDistributedElector(elector)); err != nil {
		_ = elector.Close()
		return nil, err
	}
	tick := func() {
		out.say(h.name, "leads (term %d) and runs the tick", elector.Fence())
		t.add(h.name)
	}
	if _, err := h.sched.NewJob(gocron.DurationJob(200*time.Millisecond), gocron.NewTask(tick)); err != nil {
		_ = elector.Close()
		return nil, err
	}
	h.sched.Start()
	return elector, nil
}
