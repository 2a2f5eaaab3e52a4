package dlocktest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/dlockdev/dlock/driver"
)

// The run ledger's own rules, driven through driver.Ledger directly as
// the portable layer drives it: which fence a write needs, what a rerun
// replaces, what a claim trims. Records are written as
// "minute:owner:fence:attempt:status" ("-" for no outcome), the minute
// counted from the suite's slot 0.

// ledgerCalls drives the run ledger of one name.
type ledgerCalls struct {
	t    *testing.T
	ctx  context.Context
	g    driver.Ledger
	s    *suite
	name string
}

// ledgerCalls drives the ledger of name through a Locker of its own.
func (s *suite) ledgerCalls(t *testing.T, name string) ledgerCalls {
	return ledgerCalls{t: t, ctx: s.ctx(t), g: s.locker(t).Driver().(driver.Ledger), s: s, name: name}
}

// of drives the ledger of another name through the same Locker.
func (c ledgerCalls) of(name string) ledgerCalls {
	c.name = name
	return c
}

// rec is a record of the slot at minute m, claimed under fence by owner,
// without an outcome.
func (c ledgerCalls) rec(m int, fence uint64, owner string) driver.RunRecord {
	slot := c.s.slot(c.t, m)
	return driver.RunRecord{Name: c.name, Slot: slot.Time, Schedule: slot.Schedule, Owner: owner, Fence: fence,
		Attempt: 1, Started: time.Now()}
}

// claimed claims rec's slot, keeping keep slots, and expects the claim.
func (c ledgerCalls) claimed(rec driver.RunRecord, rerun bool, keep int) {
	c.t.Helper()
	if _, ok, err := c.g.ClaimRun(c.ctx, rec, rerun, keep); !ok || err != nil {
		c.t.Fatalf("ClaimRun of %s under fence %d (rerun %v, keep %d) = %v, %v; want it claimed", c.show(rec), rec.Fence, rerun, keep, ok, err)
	}
}

// taken claims rec's slot and expects the slot's record by owner instead.
func (c ledgerCalls) taken(rec driver.RunRecord, rerun bool, keep int, owner string) driver.RunRecord {
	c.t.Helper()
	got, ok, err := c.g.ClaimRun(c.ctx, rec, rerun, keep)
	if ok || err != nil || got.Owner != owner || !got.Slot.Equal(rec.Slot) {
		c.t.Errorf("ClaimRun of %s, whose slot %s's run holds, = %+v, %v, %v; want %s's record, not claimed", c.show(rec), owner, got, ok, err, owner)
	}
	return got
}

// refusedClaim expects a claim of rec to be refused with ErrNotHeld.
func (c ledgerCalls) refusedClaim(rec driver.RunRecord) {
	c.t.Helper()
	if _, ok, err := c.g.ClaimRun(c.ctx, rec, false, 10); ok || !errors.Is(err, driver.ErrNotHeld) {
		c.t.Errorf("ClaimRun under fence %d = %v, %v; want ErrNotHeld", rec.Fence, ok, err)
	}
}

// finish records status as rec's outcome and returns FinishRun's answer.
func (c ledgerCalls) finish(rec driver.RunRecord, status string) error {
	rec.Ended, rec.Status = time.Now(), status
	return c.g.FinishRun(c.ctx, rec)
}

// refusedFinish expects an outcome for rec to be refused with ErrNotHeld.
func (c ledgerCalls) refusedFinish(rec driver.RunRecord) {
	c.t.Helper()
	if err := c.finish(rec, "ok"); !errors.Is(err, driver.ErrNotHeld) {
		c.t.Errorf("FinishRun of %s under fence %d = %v; want ErrNotHeld", c.show(rec), rec.Fence, err)
	}
}

// runs reads the name's records with Runs.
func (c ledgerCalls) runs() []string {
	c.t.Helper()
	runs, err := c.g.Runs(c.ctx, c.name)
	if err != nil {
		c.t.Fatalf("Runs(%q): %v", c.name, err)
	}
	got := []string{}
	for _, r := range runs {
		if r.Name != c.name {
			c.t.Errorf("Runs(%q) returned a record of %q", c.name, r.Name)
		}
		got = append(got, c.show(r))
	}
	return got
}

// expectRuns checks that Runs reads exactly want, newest slot first.
func (c ledgerCalls) expectRuns(want ...string) {
	c.t.Helper()
	if got := c.runs(); !slices.Equal(got, want) {
		c.t.Fatalf("Runs(%q) = %q; want %q", c.name, got, want)
	}
}

// show writes r as "minute:owner:fence:attempt:status".
func (c ledgerCalls) show(r driver.RunRecord) string {
	status := r.Status
	if r.Ended.IsZero() {
		status = "-"
	}
	m := int(r.Slot.Sub(c.s.slot(c.t, 0).Time) / time.Minute)
	return fmt.Sprintf("%d:%s:%d:%d:%s", m, r.Owner, r.Fence, r.Attempt, status)
}
