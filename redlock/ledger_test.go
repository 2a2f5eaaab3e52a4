package redlock

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/internal/rediscore"
	"github.com/redis/go-redis/v9"
)

// ledgerSlot is the slot of minute m of a fixed day.
func ledgerSlot(m int) dlock.Slot {
	return dlock.Slot{Time: time.Date(2026, 3, 1, 0, m, 0, 0, time.UTC), Schedule: "every 1m0s"}
}

// ledgerRec is a record of slot m under fence.
func ledgerRec(name string, m int, fence uint64, owner string) driver.RunRecord {
	s := ledgerSlot(m)
	return driver.RunRecord{Name: name, Slot: s.Time, Schedule: s.Schedule, Owner: owner, Fence: fence, Attempt: 1,
		Started: time.Now()}
}

// ledgerPut writes rec to one node's ledger alone, as a claim that
// reached only that node would have.
func ledgerPut(t *testing.T, c *redis.Client, rec driver.RunRecord) {
	t.Helper()
	w, err := rediscore.ClaimWrite(layout, rec, false, 100)
	if err != nil {
		t.Fatal(err)
	}
	if code, _, err := w.Claim(t.Context(), c); err != nil || code != rediscore.RunWritten {
		t.Fatalf("claim on one node = %d, %v", code, err)
	}
}

// ledgerOn lists the nodes whose ledger of name has slot m under owner.
func ledgerOn(t *testing.T, ns *nodes, name string, m int, owner string) []int {
	t.Helper()
	field, _ := rediscore.RunField(ledgerSlot(m).Time)
	var on []int
	for i, c := range ns.admin {
		v, err := c.HGet(t.Context(), layout.Runs(name), field).Result()
		if err == nil && strings.Contains(v, `"owner":"`+owner+`"`) {
			on = append(on, i)
		}
	}
	return on
}

func ledgerJob(ran *int) func(context.Context, *dlock.Lease) error {
	return func(context.Context, *dlock.Lease) error { *ran++; return nil }
}

// TestLedgerMinorityDown: with 1 of 3 nodes killed, a slot is claimed,
// run, finished and read back, and not run again; the killed node comes
// back empty and the run is still the slot's; with another node down
// (the run on one live node, the empty one without it) the answers cannot
// rule the run out, so it still holds the slot.
func TestLedgerMinorityDown(t *testing.T) {
	ns := startNodes(t, 3)
	ns.srv[2].Kill()
	l := ns.locker(t, Config{NodeTimeout: suiteNodeTimeout}, dlock.WithTTL(suiteTTL))
	ctx := t.Context()
	name := "ledger/minority-down"
	ran := 0
	r, err := l.RunOnce(ctx, name, ledgerSlot(1), ledgerJob(&ran))
	if err != nil || ran != 1 {
		t.Fatalf("RunOnce with 1 of 3 nodes down = %+v, %v (ran %d)", r, err, ran)
	}
	owner := r.Owner
	if on := ledgerOn(t, ns, name, 1, owner); len(on) != 2 {
		t.Errorf("the run is on nodes %v, want the 2 live ones", on)
	}
	expectRun := func(what string) {
		t.Helper()
		runs, err := l.Runs(ctx, name)
		if err != nil || len(runs) != 1 || runs[0].Owner != owner || runs[0].State != dlock.RunOK {
			t.Errorf("%s: Runs = %+v, %v; want the one run, ok", what, runs, err)
		}
		if _, err := l.RunOnce(ctx, name, ledgerSlot(1), ledgerJob(&ran)); !errors.Is(err, dlock.ErrSlotTaken) || ran != 1 {
			t.Errorf("%s: RunOnce again = %v (ran %d times); want ErrSlotTaken", what, err, ran)
		}
	}
	expectRun("node 2 down")
	ns.srv[2].Crash() // back, empty: it runs without persistence
	expectRun("node 2 back empty")
	ns.srv[0].Kill()
	expectRun("node 0 down, node 2 empty")
}

// TestLedgerLeftover: a record on one node of three, all answering, with
// no outcome (a claim that reached a minority, whose job never ran), is
// not the slot's run: Runs leaves it out and RunOnce claims the slot over
// it, on every node. A record with an outcome is the slot's run even on
// one node (only a claim that stood is finished), and so is one that the
// nodes not answering could make a majority.
func TestLedgerLeftover(t *testing.T) {
	ns := startNodes(t, 3)
	l := ns.locker(t, Config{NodeTimeout: suiteNodeTimeout}, dlock.WithTTL(suiteTTL))
	ctx := t.Context()
	name := "ledger/leftover"
	ledgerPut(t, ns.admin[0], ledgerRec(name, 1, 1, "leftover"))
	if runs, err := l.Runs(ctx, name); err != nil || len(runs) != 0 {
		t.Errorf("Runs with a leftover on 1 of 3 nodes = %+v, %v; want none", runs, err)
	}
	ran := 0
	r, err := l.RunOnce(ctx, name, ledgerSlot(1), ledgerJob(&ran))
	if err != nil || ran != 1 || r.Attempt != 1 {
		t.Fatalf("RunOnce over a leftover = %+v, %v (ran %d); want it run, attempt 1", r, err, ran)
	}
	if on := ledgerOn(t, ns, name, 1, r.Owner); len(on) != 3 {
		t.Errorf("the run replaced the leftover on nodes %v, want all 3", on)
	}

	finished := name + "/finished"
	done := ledgerRec(finished, 2, 1, "finished-elsewhere")
	done.Ended, done.Status = time.Now(), "ok"
	ledgerPut(t, ns.admin[1], done)
	runs, err := l.Runs(ctx, finished)
	if err != nil || len(runs) != 1 || runs[0].Owner != "finished-elsewhere" || runs[0].State != dlock.RunOK {
		t.Errorf("Runs with a finished run on 1 of 3 nodes = %+v, %v; want it, ok", runs, err)
	}
	if _, err := l.RunOnce(ctx, finished, ledgerSlot(2), ledgerJob(&ran)); !errors.Is(err, dlock.ErrSlotTaken) || ran != 1 {
		t.Errorf("RunOnce of a slot finished on 1 of 3 nodes = %v (ran %d times); want ErrSlotTaken", err, ran)
	}

	maybe := name + "/maybe"
	ledgerPut(t, ns.admin[0], ledgerRec(maybe, 3, 1, "maybe"))
	ns.srv[1].Kill()
	var taken *dlock.SlotTakenError
	if _, err := l.RunOnce(ctx, maybe, ledgerSlot(3), ledgerJob(&ran)); !errors.As(err, &taken) || taken.Run.Owner != "maybe" || ran != 1 {
		t.Errorf("RunOnce of a slot on 1 node of 3, 1 down = %v (ran %d times); want the slot taken by its run", err, ran)
	}
}

// TestLedgerNeedsMajority: with 2 of 3 nodes down the ledger neither
// claims nor reads, and says how many nodes answered; a node whose ledger
// has seen a higher fence refuses a write even when the others would take
// it.
func TestLedgerNeedsMajority(t *testing.T) {
	ns := startNodes(t, 3)
	l := ns.locker(t, Config{NodeTimeout: suiteNodeTimeout})
	g := l.Driver().(driver.Ledger)
	ctx := t.Context()
	name := "ledger/majority"
	ledgerPut(t, ns.admin[2], ledgerRec(name, 9, 50, "later"))
	if _, ok, err := g.ClaimRun(ctx, ledgerRec(name, 1, 40, "stale"), false, 10); ok || !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("ClaimRun under fence 40 with 50 on one node = %v, %v; want ErrNotHeld", ok, err)
	}
	if on := ledgerOn(t, ns, name, 1, "stale"); len(on) != 0 {
		t.Errorf("the refused claim was written to nodes %v", on)
	}
	ns.srv[0].Kill()
	ns.srv[1].Kill()
	_, ok, err := g.ClaimRun(ctx, ledgerRec(name, 2, 60, "h"), false, 10)
	if ok || err == nil || !strings.Contains(err.Error(), "1 of 3 nodes read, 2 needed") {
		t.Errorf("ClaimRun with 2 of 3 nodes down = %v, %v; want an error saying 1 of 3 nodes read", ok, err)
	}
	if _, err := g.Runs(ctx, name); err == nil || !strings.Contains(err.Error(), "1 of 3 nodes read, 2 needed") {
		t.Errorf("Runs with 2 of 3 nodes down = %v; want an error saying 1 of 3 nodes read", err)
	}
}

// TestLedgerUnfenced: without quorum fences there is no ledger.
func TestLedgerUnfenced(t *testing.T) {
	ns := startNodes(t, 3)
	l := ns.locker(t, Config{NoFencing: true, NodeTimeout: suiteNodeTimeout})
	if _, err := l.Runs(t.Context(), "ledger/unfenced"); !errors.Is(err, dlock.ErrUnsupported) || !strings.Contains(err.Error(), "NoFencing") {
		t.Errorf("Runs with fencing off = %v, want ErrUnsupported naming Config.NoFencing", err)
	}
	_, err := l.RunOnce(t.Context(), "ledger/unfenced", ledgerSlot(1), func(context.Context, *dlock.Lease) error {
		t.Error("the job ran with fencing off")
		return nil
	})
	if !errors.Is(err, dlock.ErrUnsupported) {
		t.Errorf("RunOnce with fencing off = %v, want ErrUnsupported", err)
	}
}

// TestMergeSlot: how the copies of one slot on the nodes that answered
// (3 nodes, quorum 2) make its run.
func TestMergeSlot(t *testing.T) {
	run := func(fence uint64, ended bool) driver.RunRecord {
		r := driver.RunRecord{Name: "n", Slot: ledgerSlot(1).Time, Fence: fence, Attempt: 1, Owner: "f" + string(rune('0'+fence))}
		if ended {
			r.Ended, r.Status = time.Now(), "ok"
		}
		return r
	}
	cases := []struct {
		what   string
		copies []driver.RunRecord
		silent int
		want   uint64 // fence of the slot's run, 0 for none
		ended  bool
	}{
		{"nothing", nil, 0, 0, false},
		{"on all three", []driver.RunRecord{run(1, false), run(1, false), run(1, false)}, 0, 1, false},
		{"on two of three", []driver.RunRecord{run(1, false), run(1, false)}, 0, 1, false},
		{"a leftover on one of three", []driver.RunRecord{run(1, false)}, 0, 0, false},
		{"on one, one node silent", []driver.RunRecord{run(1, false)}, 1, 1, false},
		{"finished on one", []driver.RunRecord{run(1, true)}, 0, 1, true},
		{"finished on one of the run's two", []driver.RunRecord{run(1, false), run(1, true)}, 0, 1, true},
		{"a failed rerun's leftover over the run", []driver.RunRecord{run(2, false), run(1, false), run(1, false)}, 0, 1, false},
		{"a rerun that stood", []driver.RunRecord{run(2, false), run(2, false), run(1, false)}, 0, 2, false},
		{"the run replaced on one node by a failed rerun", []driver.RunRecord{run(2, false), run(1, false)}, 0, 1, false},
		{"a failed rerun's leftover, finished run", []driver.RunRecord{run(2, false), run(1, true), run(1, true)}, 0, 1, true},
	}
	for _, c := range cases {
		got, ok := mergeSlot(c.copies, c.silent, 2)
		if c.want == 0 {
			if ok {
				t.Errorf("%s: merged to %+v, want no run", c.what, got)
			}
			continue
		}
		if !ok || got.Fence != c.want || got.Ended.IsZero() == c.ended {
			t.Errorf("%s: merged to %+v, %v; want fence %d, finished %v", c.what, got, ok, c.want, c.ended)
		}
	}
}
