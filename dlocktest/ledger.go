package dlocktest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/driver"
)

// testRunOnce: on a backend with a run ledger (driver.Ledger), a slot runs
// once among many Lockers, later callers learn who ran it and how it
// ended, a crashed run is reported (and run again only when asked), the
// ledger's writes are fenced (fences compared as numbers), a rerun
// replaces only a run without an outcome, and the ledger keeps no more
// than it is told to.
func (s *suite) testRunOnce(t *testing.T) {
	if !s.provides(Ledger) {
		if _, err := s.locker(t).Runs(s.ctx(t), s.name(t)); !errors.Is(err, dlock.ErrUnsupported) {
			t.Errorf("Runs on a driver without a Ledger = %v, want ErrUnsupported", err)
		}
		s.skipLacking(t, Ledger)
	}
	t.Run("OncePerSlot", s.testOncePerSlot)
	t.Run("Crashed", s.testRunCrashed)
	t.Run("Fenced", s.testLedgerFenced)
	t.Run("FenceOrder", s.testLedgerFenceOrder)
	t.Run("Rerun", s.testLedgerRerun)
	t.Run("Bounded", s.testLedgerBounded)
	t.Run("Trim", s.testLedgerTrim)
	t.Run("Killed", s.testRunOnceKilled)
	t.Run("Skew", s.testRunOnceSkew)
}

// slot is a schedule point unique to t.
func (s *suite) slot(t testing.TB, minutes int) dlock.Slot {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return dlock.Slot{Time: base.Add(time.Duration(minutes) * time.Minute), Schedule: "every 1m0s"}
}

// testOncePerSlot: 8 Lockers run the same slot at once, each waiting for
// the lock: exactly one runs the job, every other gets the slot's run,
// ended ok, with the runner's owner and fence; a later caller too.
func (s *suite) testOncePerSlot(t *testing.T) {
	name := s.name(t)
	slot := s.slot(t, 1)
	var ran atomic.Int32
	var wg sync.WaitGroup
	results := make([]error, 8)
	for i := range results {
		l := s.locker(t)
		wg.Go(func() {
			_, results[i] = l.RunOnce(s.ctx(t), name, slot, func(ctx context.Context, ls *dlock.Lease) error {
				ran.Add(1)
				time.Sleep(10 * time.Millisecond)
				return nil
			}, s.opts(dlock.WithWait(s.longTTL()))...)
		})
	}
	wg.Wait()
	if n := ran.Load(); n != 1 {
		t.Fatalf("the slot's job ran %d times among 8 Lockers, want once", n)
	}
	oks := 0
	for _, err := range results {
		var taken *dlock.SlotTakenError
		switch {
		case err == nil:
			oks++
		case errors.As(err, &taken):
			if taken.Run.State != dlock.RunOK || taken.Run.Fence == 0 || taken.Run.Owner == "" || !taken.Run.Slot.Time.Equal(slot.Time) {
				t.Errorf("slot taken by %+v, want the run that ended ok, with its owner and fence", taken.Run)
			}
		default:
			t.Errorf("RunOnce = %v, want nil or *SlotTakenError", err)
		}
	}
	if oks != 1 {
		t.Errorf("%d RunOnce calls returned nil, want 1", oks)
	}
	_, err := s.locker(t).RunOnce(s.ctx(t), name, slot, func(context.Context, *dlock.Lease) error {
		t.Error("a later caller ran the slot again")
		return nil
	}, s.opts()...)
	if !errors.Is(err, dlock.ErrSlotTaken) {
		t.Errorf("a later RunOnce = %v, want ErrSlotTaken", err)
	}
	runs, err := s.locker(t).Runs(s.ctx(t), name)
	if err != nil || len(runs) != 1 || runs[0].State != dlock.RunOK || runs[0].Status != "ok" || runs[0].Ended.Before(runs[0].Started) {
		t.Errorf("Runs = %+v, %v; want the one run, ok", runs, err)
	}
}

// testRunCrashed: a run that claimed its slot and whose runner vanished
// without an outcome (its lock then free) is a crashed run: RunOnce does
// not run the slot again, and says so, unless WithRetryCrashed; the rerun
// is attempt 2, under a higher fence.
func (s *suite) testRunCrashed(t *testing.T) {
	name := s.name(t)
	slot := s.slot(t, 2)
	l := s.locker(t)
	ctx := s.ctx(t)
	ls := s.acquire(t, l, name)
	rec := driver.RunRecord{Name: name, Slot: slot.Time, Schedule: slot.Schedule, Owner: "crashed-host/1", Fence: ls.Fence(), Attempt: 1, Started: time.Now()}
	if _, ok, err := l.Driver().(driver.Ledger).ClaimRun(ctx, rec, false, 10); err != nil || !ok {
		t.Fatalf("ClaimRun = %v, %v", ok, err)
	}
	release(t, ls) // the runner is gone: its record has no outcome
	runs, err := l.Runs(ctx, name)
	if err != nil || len(runs) != 1 || runs[0].State != dlock.RunCrashed {
		t.Fatalf("Runs = %+v, %v; want one crashed run", runs, err)
	}
	_, err = l.RunOnce(ctx, name, slot, func(context.Context, *dlock.Lease) error {
		t.Error("a crashed slot ran again without WithRetryCrashed")
		return nil
	}, s.opts()...)
	var taken *dlock.SlotTakenError
	if !errors.As(err, &taken) || taken.Run.State != dlock.RunCrashed || taken.Run.Owner != "crashed-host/1" {
		t.Fatalf("RunOnce on a crashed slot = %v, want *SlotTakenError of the crashed run", err)
	}
	ran := 0
	r, err := l.RunOnce(ctx, name, slot, func(context.Context, *dlock.Lease) error {
		ran++
		return errors.New("exit status 3")
	}, s.opts(dlock.WithRetryCrashed(true))...)
	if ran != 1 || err == nil || r.Attempt != 2 || r.Fence <= rec.Fence || r.State != dlock.RunFailed || r.Status != "exit status 3" {
		t.Fatalf("RunOnce with WithRetryCrashed = %+v, %v (ran %d); want one rerun, attempt 2, a higher fence, failed with exit status 3", r, err, ran)
	}
	if _, err := l.RunOnce(ctx, name, slot, func(context.Context, *dlock.Lease) error {
		t.Error("a slot whose rerun recorded its outcome ran a third time")
		return nil
	}, s.opts(dlock.WithRetryCrashed(true))...); !errors.Is(err, dlock.ErrSlotTaken) {
		t.Errorf("RunOnce after the rerun = %v, want ErrSlotTaken", err)
	}
}

// testLedgerFenced: once a grant has written to a name's ledger, a write
// under an older grant's fence is refused: a runner that lost its lock
// while paused cannot overwrite its successor's record.
func (s *suite) testLedgerFenced(t *testing.T) {
	name := s.name(t)
	l := s.locker(t)
	ctx := s.ctx(t)
	g := l.Driver().(driver.Ledger)
	old := s.acquire(t, l, name)
	oldFence := old.Fence()
	release(t, old)
	cur := s.acquire(t, l, name)
	defer release(t, cur)
	slot := s.slot(t, 3)
	rec := driver.RunRecord{Name: name, Slot: slot.Time, Schedule: slot.Schedule, Owner: "current", Fence: cur.Fence(), Attempt: 1, Started: time.Now()}
	if _, ok, err := g.ClaimRun(ctx, rec, false, 10); err != nil || !ok {
		t.Fatalf("ClaimRun under the current fence = %v, %v", ok, err)
	}
	stale := rec
	stale.Fence, stale.Owner, stale.Slot = oldFence, "stale", slot.Time.Add(time.Minute)
	if _, ok, err := g.ClaimRun(ctx, stale, false, 10); ok || !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("ClaimRun under an older fence = %v, %v; want ErrNotHeld", ok, err)
	}
	stale.Slot, stale.Ended, stale.Status = slot.Time, time.Now(), "ok"
	if err := g.FinishRun(ctx, stale); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("FinishRun under an older fence = %v; want ErrNotHeld", err)
	}
	rec.Ended, rec.Status = time.Now(), "ok"
	if err := g.FinishRun(ctx, rec); err != nil {
		t.Errorf("FinishRun under the current fence: %v", err)
	}
	runs, err := g.Runs(ctx, name)
	if err != nil || len(runs) != 1 || runs[0].Owner != "current" || runs[0].Status != "ok" {
		t.Errorf("Runs = %+v, %v; want only the current grant's run, ok", runs, err)
	}
}

// testLedgerBounded: the ledger keeps the newest slots it is told to keep,
// newest first, and MissedSlots names the points between them no run has.
func (s *suite) testLedgerBounded(t *testing.T) {
	name := s.name(t)
	l := s.locker(t)
	ctx := s.ctx(t)
	for _, m := range []int{10, 11, 13, 14, 16} {
		if _, err := l.RunOnce(ctx, name, s.slot(t, m), func(context.Context, *dlock.Lease) error { return nil },
			s.opts(dlock.WithKeepRuns(4))...); err != nil {
			t.Fatalf("slot %d: %v", m, err)
		}
	}
	runs, err := l.Runs(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	for _, r := range runs {
		got = append(got, int(r.Slot.Time.Sub(s.slot(t, 0).Time)/time.Minute))
	}
	if len(got) != 4 || got[0] != 16 || got[1] != 14 || got[2] != 13 || got[3] != 11 {
		t.Fatalf("Runs kept slots %v, want the newest 4 newest first: [16 14 13 11]", got)
	}
	every, _ := dlock.Every(time.Minute)
	missed := dlock.MissedSlots(every, runs, s.slot(t, 17).Time)
	if len(missed) != 3 || !missed[0].Equal(s.slot(t, 12).Time) || !missed[1].Equal(s.slot(t, 15).Time) || !missed[2].Equal(s.slot(t, 17).Time) {
		t.Errorf("MissedSlots = %v, want minutes 12, 15 and 17", missed)
	}
}
