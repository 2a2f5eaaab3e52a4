package redlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlockdev/dlock/driver"
)

// decide waits for the attempt's outcome. Deadlines never pass the
// validity window: an answer that comes later could not be used.
func (a *attempt) decide(ctx context.Context, start time.Time) (driver.Grant, error) {
	ttl := a.req.TTL
	end := start.Add(ttl - driver.ClockDrift(ttl))
	// Each request is bounded by the node timeout from when it is sent;
	// the attempt waits up to twice that (three times in gate mode: the
	// gate, then the others), so that a busy scheduler starting the
	// requests late does not fail the attempt. A node that is slow or
	// dead still never delays the outcome once a majority has answered.
	wait := 2 * a.d.cfg.nodeTimeout
	if a.gate >= 0 {
		wait += a.d.cfg.nodeTimeout
	}
	all, granted := a.gather1(ctx, earliest(start.Add(wait), end))
	if err := ctx.Err(); err != nil {
		return driver.Grant{}, err
	}
	if len(granted) < a.d.quorum {
		a.split = len(granted) > 0
		return a.refused(all)
	}
	if a.d.cfg.fencing {
		if err := a.fenced(ctx, granted, end); err != nil {
			return driver.Grant{}, err
		}
	}
	validity := ttl - time.Since(start) - driver.ClockDrift(ttl)
	if validity <= 0 {
		return driver.Grant{}, fmt.Errorf("redlock: a majority granted only after %s, leaving no validity of the %s TTL", time.Since(start).Round(time.Millisecond), ttl)
	}
	// Grant.TTL stays zero, meaning the requested TTL: the portable layer
	// counts the lease from when this attempt was sent, less the same
	// drift, which is exactly the validity left above.
	return driver.Grant{Acquired: true, Fence: a.fence}, nil
}

// fenced runs the decision's phase 2: it sets the fence from the phase-1
// grants, lets the workers raise the nodes that returned less, and waits
// until a majority is known to hold the fence (nil), or returns ctx's
// error or one saying the fence did not reach a majority before end.
func (a *attempt) fenced(ctx context.Context, granted []p1, end time.Time) error {
	a.fence = maxValue(granted)
	if minValue(granted) < a.fence {
		a.d.phase2s.Add(1)
	}
	close(a.decided)
	if a.gather2(ctx, earliest(time.Now().Add(2*a.d.cfg.nodeTimeout), end)) {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return fmt.Errorf("redlock: fence %d could not be written to a majority of %d nodes in time", a.fence, len(a.d.nodes))
}

// gather1 collects phase-1 answers until a majority has granted, a
// majority has become impossible, the deadline passes or ctx is done.
func (a *attempt) gather1(ctx context.Context, deadline time.Time) (all, granted []p1) {
	n, q := len(a.d.nodes), a.d.quorum
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for len(all) < n {
		select {
		case r := <-a.phase1:
			all = append(all, r)
			if r.granted {
				granted = append(granted, r)
			}
			if len(granted) >= q || len(granted)+n-len(all) < q {
				return all, granted
			}
		case <-timer.C:
			return all, granted
		case <-ctx.Done():
			return all, granted
		}
	}
	return all, granted
}

// gather2 counts the nodes in P until a majority is reached (true) or
// has become impossible, the deadline passes or ctx is done (false).
func (a *attempt) gather2(ctx context.Context, deadline time.Time) bool {
	n, q := len(a.d.nodes), a.d.quorum
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	in, answered := 0, 0
	for in < q && in+n-answered >= q {
		select {
		case ok := <-a.phase2:
			answered++
			if ok {
				in++
			}
		case <-timer.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
	return in >= q
}

func maxValue(rs []p1) uint64 {
	var m uint64
	for _, r := range rs {
		m = max(m, r.value)
	}
	return m
}

func minValue(rs []p1) uint64 {
	m := rs[0].value
	for _, r := range rs {
		m = min(m, r.value)
	}
	return m
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// refused explains a phase 1 without a majority. It is "held elsewhere"
// only when the nodes that named a holder are enough, alone, to make a
// majority impossible (more than n - quorum of them): then the answer
// does not depend on any node that failed or stayed silent. Otherwise an
// outage, not a holder, may be why, and the nodes' errors are returned;
// they are permanent (driver.Permanent) when the permanent ones alone
// make a majority impossible. In gate mode, the gate's naming a holder is
// such an answer too: the other nodes were not asked.
func (a *attempt) refused(all []p1) (driver.Grant, error) {
	n, q := len(a.d.nodes), a.d.quorum
	var held []driver.Holder
	var errs []error
	permanent, skipped := 0, 0
	for _, r := range all {
		switch {
		case r.skipped:
			skipped++
		case r.err != nil:
			errs = append(errs, r.err)
			if errors.Is(r.err, driver.ErrPermanent) {
				permanent++
			}
		case !r.granted:
			held = append(held, r.holder)
		}
	}
	// In gate mode the others are skipped only when the gate named a
	// holder: that answer alone decided the attempt.
	if len(held) > n-q || (skipped > 0 && len(held) > 0 && len(errs) == 0) {
		return driver.Grant{Holder: likeliest(held)}, nil
	}
	failed := len(errs) + n - len(all)
	errs = append(errs, a.silent(all)...)
	err := fmt.Errorf("redlock: no majority: %d of %d nodes failed, %d named a holder: %w", failed, n, len(held), joinNodes(errs))
	if permanent > n-q {
		err = driver.Permanent(err)
	}
	return driver.Grant{}, err
}

// silent names the nodes whose phase-1 answer is not among all.
func (a *attempt) silent(all []p1) []error {
	heard := make([]bool, len(a.d.nodes))
	for _, r := range all {
		heard[r.node] = true
	}
	var errs []error
	for i, h := range heard {
		if !h {
			errs = append(errs, a.d.nodeErr(i, errNodeTimeout))
		}
	}
	return errs
}

// likeliest picks the holder most nodes report (by fence; ties go to the
// higher fence), with the shortest time left among those reports, so that
// a waiter never sleeps past the moment a majority may be free.
func likeliest(hs []driver.Holder) driver.Holder {
	count := map[uint64]int{}
	best := hs[0]
	for _, h := range hs {
		count[h.Fence]++
	}
	for _, h := range hs {
		c, bc := count[h.Fence], count[best.Fence]
		switch {
		case c > bc || (c == bc && h.Fence > best.Fence):
			best = h
		case h.Fence == best.Fence && h.TTL >= 0 && (best.TTL < 0 || h.TTL < best.TTL):
			best = h
		}
	}
	return best
}
