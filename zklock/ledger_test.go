package zklock_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	"github.com/dlockdev/dlock/zklock"
	"github.com/go-zookeeper/zk"
)

// minute is the slot m minutes into a fixed day.
func minute(m int) time.Time {
	return time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(m) * time.Minute)
}

// run is a record of name's slot m claimed under fence, without an outcome.
func run(name string, m int, fence uint64, owner string) driver.RunRecord {
	return driver.RunRecord{Name: name, Slot: minute(m), Schedule: "every 1m0s", Owner: owner, Fence: fence,
		Attempt: 1, Started: time.Now()}
}

func ledgerOf(t testing.TB, l *dlock.Locker) driver.Ledger {
	t.Helper()
	g, ok := l.Driver().(driver.Ledger)
	if !ok {
		t.Fatalf("%T does not implement driver.Ledger", l.Driver())
	}
	return g
}

// ledgerNode is name's run ledger znode under the default root: the
// name escaped as its lock's znode is, beneath ROOT/%runs.
func ledgerNode(name string) string {
	return zklock.DefaultRoot + "/%runs/" + strings.TrimPrefix(lockDir(name), zklock.DefaultRoot+"/")
}

// slotNode is the znode name of slot m: its Unix nanoseconds in 19 digits.
func slotNode(m int) string { return fmt.Sprintf("%019d", minute(m).UnixNano()) }

// stored reads name's ledger as ZooKeeper has it: each slot's record as
// "minute:owner:fence:attempt:status" ("-" for no outcome), newest slot
// first, the highest fence its znode holds, and that znode's version.
func stored(t testing.TB, conn *zk.Conn, name string) (recs []string, highest string, version int32) {
	t.Helper()
	data, st, err := conn.Get(ledgerNode(name))
	if err != nil {
		t.Fatalf("get %s: %v", ledgerNode(name), err)
	}
	children, _, err := conn.Children(ledgerNode(name))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(children)
	slices.Reverse(children)
	for _, c := range children {
		raw, _, err := conn.Get(ledgerNode(name) + "/" + c)
		if err != nil {
			t.Fatal(err)
		}
		var r struct {
			Slot    time.Time `json:"slot"`
			Owner   string    `json:"owner"`
			Fence   uint64    `json:"fence,string"`
			Attempt int       `json:"attempt"`
			Status  string    `json:"status"`
			Ended   time.Time `json:"ended"`
		}
		if err := json.Unmarshal(raw, &r); err != nil {
			t.Fatalf("slot %s: %q: %v", c, raw, err)
		}
		if want := fmt.Sprintf("%019d", r.Slot.UnixNano()); c != want {
			t.Errorf("slot znode %s holds slot %s (%s)", c, r.Slot, want)
		}
		if r.Ended.IsZero() {
			r.Status = "-"
		}
		recs = append(recs, fmt.Sprintf("%d:%s:%d:%d:%s", int(r.Slot.Sub(minute(0))/time.Minute), r.Owner, r.Fence, r.Attempt, r.Status))
	}
	return recs, string(data), st.Version
}

func wantStored(t testing.TB, conn *zk.Conn, name string, recs []string, highest string) int32 {
	t.Helper()
	got, h, v := stored(t, conn, name)
	if !slices.Equal(got, recs) || h != highest {
		t.Fatalf("stored %q, highest fence %q; want %q, %q", got, h, recs, highest)
	}
	return v
}

// TestLedgerFencedInZooKeeper: the ledger's znodes refuse a write under a
// fence below the highest the name's ledger has seen, and nothing is
// written then (read back from ZooKeeper, the fence znode's version
// included): a claim of a new slot, an outcome; an outcome for a record
// that is no longer its run's; a rerun replaces only a record without an
// outcome under a lower fence, and a finished record never.
func TestLedgerFencedInZooKeeper(t *testing.T) {
	srv := testserver.ZooKeeper(t)
	admin := connect(t, srv.Addr)
	g := ledgerOf(t, locker(t, srv.Addr))
	c := context.Background()
	name := "fenced/a job" // a "/" and a space: escaped as the lock's znode is
	if _, ok, err := g.ClaimRun(c, run(name, 1, 10, "a"), false, 10); !ok || err != nil {
		t.Fatalf("ClaimRun at fence 10 = %v, %v", ok, err)
	}
	v := wantStored(t, admin, name, []string{"1:a:10:1:-"}, "10")
	if _, ok, err := g.ClaimRun(c, run(name, 2, 9, "stale"), false, 10); ok || !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("ClaimRun at fence 9 after 10 = %v, %v; want ErrNotHeld", ok, err)
	}
	stale := run(name, 1, 9, "stale")
	stale.Ended, stale.Status = time.Now(), "ok"
	if err := g.FinishRun(c, stale); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("FinishRun at fence 9 after 10 = %v; want ErrNotHeld", err)
	}
	if v2 := wantStored(t, admin, name, []string{"1:a:10:1:-"}, "10"); v2 != v {
		t.Errorf("the refused writes changed the fence znode: version %d, was %d", v2, v)
	}

	// Fence 11 claims slot 1 again without rerun: the record stays a's,
	// and 11 becomes the highest; a's outcome is then refused.
	got, ok, err := g.ClaimRun(c, run(name, 1, 11, "b"), false, 10)
	if ok || err != nil || got.Owner != "a" || got.Fence != 10 || !got.Slot.Equal(minute(1)) || !got.Ended.IsZero() || got.Name != name {
		t.Errorf("ClaimRun of a taken slot = %+v, %v, %v; want a's record, not claimed", got, ok, err)
	}
	done := run(name, 1, 10, "a")
	done.Ended, done.Status = time.Now(), "ok"
	if err := g.FinishRun(c, done); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("FinishRun at fence 10 after 11 = %v; want ErrNotHeld", err)
	}
	wantStored(t, admin, name, []string{"1:a:10:1:-"}, "11")

	// Fence 12 reruns it (no outcome, lower fence); fence 11's outcome
	// for the slot is not its run's.
	rerun := run(name, 1, 12, "c")
	rerun.Attempt = 2
	if _, ok, err := g.ClaimRun(c, rerun, true, 10); !ok || err != nil {
		t.Fatalf("rerun at fence 12 = %v, %v", ok, err)
	}
	wrong := run(name, 1, 11, "b")
	wrong.Ended, wrong.Status = time.Now(), "ok"
	if err := g.FinishRun(c, wrong); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("FinishRun at fence 11 of fence 12's record = %v; want ErrNotHeld", err)
	}
	rerun.Ended, rerun.Status = time.Now(), "exit status 3"
	if err := g.FinishRun(c, rerun); err != nil {
		t.Fatalf("FinishRun of the rerun: %v", err)
	}
	// A record with an outcome is never replaced, even with rerun.
	if got, ok, err := g.ClaimRun(c, run(name, 1, 13, "d"), true, 10); ok || err != nil || got.Owner != "c" || got.Attempt != 2 {
		t.Errorf("rerun of a finished slot = %+v, %v, %v; want c's record, not claimed", got, ok, err)
	}
	wantStored(t, admin, name, []string{"1:c:12:2:exit status 3"}, "13")
}

// TestLedgerTrim: a claim keeps the newest keep slots of its name (the
// other names' untouched), deleting the older znodes in the same
// transaction; a claim that finds its slot taken trims nothing; a claim
// of a slot older than the kept ones is recorded, and dropped by the next
// claim's trim.
func TestLedgerTrim(t *testing.T) {
	srv := testserver.ZooKeeper(t)
	admin := connect(t, srv.Addr)
	g := ledgerOf(t, locker(t, srv.Addr))
	c := context.Background()
	name, other := "trim", "trim/other"
	claim := func(name string, m, keep int, owner string) bool {
		t.Helper()
		_, ok, err := g.ClaimRun(c, run(name, m, 1, owner), false, keep)
		if err != nil {
			t.Fatalf("ClaimRun slot %d: %v", m, err)
		}
		return ok
	}
	claim(other, 1, 100, "o")
	for _, m := range []int{1, 3, 2, 5, 4} {
		claim(name, m, 3, "a")
	}
	wantStored(t, admin, name, []string{"5:a:1:1:-", "4:a:1:1:-", "3:a:1:1:-"}, "1")
	if claim(name, 4, 1, "b") {
		t.Fatal("a taken slot was claimed")
	}
	wantStored(t, admin, name, []string{"5:a:1:1:-", "4:a:1:1:-", "3:a:1:1:-"}, "1")
	if !claim(name, 0, 3, "old") {
		t.Fatal("an old slot was not claimed")
	}
	wantStored(t, admin, name, []string{"5:a:1:1:-", "4:a:1:1:-", "3:a:1:1:-", "0:old:1:1:-"}, "1")
	claim(name, 6, 2, "a")
	wantStored(t, admin, name, []string{"6:a:1:1:-", "5:a:1:1:-"}, "1")
	wantStored(t, admin, other, []string{"1:o:1:1:-"}, "1")
	runs, err := g.Runs(c, name)
	if err != nil || len(runs) != 2 || !runs[0].Slot.Equal(minute(6)) || !runs[1].Slot.Equal(minute(5)) || runs[0].Name != name {
		t.Errorf("Runs = %+v, %v; want slots 6 and 5", runs, err)
	}
}

// TestLedgerInvalid: a keep below 1, a slot without a time or outside
// the range a slot znode's name holds (1970 to 2262), a record without
// a name or with an attempt below 1 are refused before anything is
// written, with an error naming the value; so is a zero slot given to
// FinishRun.
func TestLedgerInvalid(t *testing.T) {
	srv := testserver.ZooKeeper(t)
	admin := connect(t, srv.Addr)
	g := ledgerOf(t, locker(t, srv.Addr))
	c := context.Background()
	name := "invalid"
	mod := func(f func(*driver.RunRecord)) driver.RunRecord {
		r := run(name, 1, 5, "a")
		f(&r)
		return r
	}
	cases := []struct {
		what string
		rec  driver.RunRecord
		keep int
		want string
	}{
		{"keep 0", run(name, 1, 5, "a"), 0, "keep 0 runs"},
		{"keep -1", run(name, 1, 5, "a"), -1, "keep -1 runs"},
		{"zero slot", mod(func(r *driver.RunRecord) { r.Slot = time.Time{} }), 10, "slot 0001-01-01T00:00:00Z"},
		{"slot before 1970", mod(func(r *driver.RunRecord) { r.Slot = time.Date(1969, 12, 31, 0, 0, 0, 0, time.UTC) }), 10, "slot 1969-12-31T00:00:00Z"},
		{"slot after 2262", mod(func(r *driver.RunRecord) { r.Slot = time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC) }), 10, "slot 2300-01-01T00:00:00Z"},
		{"no name", mod(func(r *driver.RunRecord) { r.Name = "" }), 10, "no name"},
		{"attempt 0", mod(func(r *driver.RunRecord) { r.Attempt = 0 }), 10, "attempt 0"},
	}
	for _, tc := range cases {
		_, ok, err := g.ClaimRun(c, tc.rec, false, tc.keep)
		if ok || !errors.Is(err, dlock.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ClaimRun with %s = %v, %v; want ErrInvalidArgument naming %q", tc.what, ok, err, tc.want)
		}
	}
	zero := mod(func(r *driver.RunRecord) { r.Slot, r.Ended, r.Status = time.Time{}, time.Now(), "ok" })
	if err := g.FinishRun(c, zero); !errors.Is(err, dlock.ErrInvalidArgument) || !strings.Contains(err.Error(), "slot 0001-01-01T00:00:00Z") {
		t.Errorf("FinishRun with a zero slot = %v; want ErrInvalidArgument naming the slot", err)
	}
	if ok, _, err := admin.Exists(ledgerNode(name)); ok || err != nil {
		t.Errorf("after the refused writes %s exists: %v, %v; want nothing written", ledgerNode(name), ok, err)
	}
}

// TestLedgerClaimContended: 8 callers, each on its own session and none
// holding the lock, claim the same slot at once, for 10 slots: on even
// slots all under one fence (so the fence refuses none of them, and the
// slot's znode alone decides), on odd slots each under its own. Exactly
// one claims each slot; every other caller gets that claim's record or,
// its fence being below one already written, ErrNotHeld; and the
// ledger's fence is the highest any caller carried, never lowered by a
// caller that read it before a higher one wrote.
func TestLedgerClaimContended(t *testing.T) {
	srv := testserver.ZooKeeper(t)
	admin := connect(t, srv.Addr)
	const callers, slots = 8, 10
	var ledgers [callers]driver.Ledger
	for i := range ledgers {
		ledgers[i] = ledgerOf(t, locker(t, srv.Addr))
	}
	c := context.Background()
	name := "contended"
	refused := 0
	for m := range slots {
		var (
			wg      sync.WaitGroup
			start   = make(chan struct{})
			results [callers]driver.RunRecord
			oks     [callers]bool
			errs    [callers]error
		)
		for i := range callers {
			wg.Go(func() {
				<-start
				fence := uint64(1000 * (m + 1))
				if m%2 == 1 {
					fence += uint64(i)
				}
				results[i], oks[i], errs[i] = ledgers[i].ClaimRun(c, run(name, m, fence, fmt.Sprintf("caller-%d", i)), false, 1000)
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for i := range callers {
			switch {
			case oks[i] && winner >= 0:
				t.Fatalf("slot %d claimed by caller-%d and caller-%d", m, winner, i)
			case oks[i]:
				winner = i
			}
		}
		if winner < 0 {
			t.Fatalf("slot %d: nobody claimed it: %v", m, errs)
		}
		for i := range callers {
			switch {
			case i == winner:
			case errors.Is(errs[i], driver.ErrNotHeld):
				refused++
			case errs[i] != nil:
				t.Fatalf("caller-%d: %v", i, errs[i])
			case results[i].Owner != fmt.Sprintf("caller-%d", winner):
				t.Fatalf("slot %d: caller-%d got %+v, want caller-%d's record", m, i, results[i], winner)
			}
		}
		top := 1000*(m+1) + (callers-1)*(m%2)
		if _, highest, _ := stored(t, admin, name); highest != fmt.Sprint(top) {
			t.Fatalf("slot %d: the ledger's fence is %s, want %d, the highest carried", m, highest, top)
		}
	}
	runs, err := ledgers[0].Runs(c, name)
	if err != nil || len(runs) != slots {
		t.Fatalf("Runs: %d records, %v; want %d", len(runs), err, slots)
	}
	t.Logf("%d slots, %d callers each: one claim per slot; %d of %d losers refused by the fence, the rest got the winner's record",
		slots, callers, refused, slots*(callers-1))
}

// TestLedgerSurvivesRestart: the ledger's znodes are persistent and
// written through ZooKeeper's transaction log: after a graceful restart
// and after a SIGKILL of the server (restarted on the same data
// directory), a finished run and a run without an outcome are read back
// as they were written, a taken slot is not run again, and the name's
// highest fence still refuses an older grant's write.
func TestLedgerSurvivesRestart(t *testing.T) {
	srv := testserver.ZooKeeper(t)
	c := context.Background()
	name := "ledger/restart"
	before := ledgerBeforeRestart(t, srv.Addr, name)
	for _, restart := range []struct {
		how  string
		stop func()
	}{{"a graceful restart", srv.Stop}, {"a SIGKILL and restart", srv.Kill}} {
		restart.stop()
		srv.Start()
		l := locker(t, srv.Addr)
		after, err := l.Runs(c, name)
		if err != nil || !sameRuns(after, before) {
			t.Fatalf("after %s Runs = %v, %v\nwant as before: %v", restart.how, after, err, before)
		}
		_, err = l.RunOnce(c, name, after[1].Slot, func(context.Context, *dlock.Lease) error {
			t.Errorf("after %s a slot that ran before ran again", restart.how)
			return nil
		})
		if !errors.Is(err, dlock.ErrSlotTaken) {
			t.Errorf("after %s RunOnce of the finished slot = %v, want ErrSlotTaken", restart.how, err)
		}
		stale := run(name, 9, after[0].Fence-1, "stale")
		if _, ok, err := ledgerOf(t, l).ClaimRun(c, stale, false, 10); ok || !errors.Is(err, driver.ErrNotHeld) {
			t.Errorf("after %s ClaimRun under an older fence = %v, %v; want ErrNotHeld", restart.how, ok, err)
		}
		_ = l.Close()
	}
}

// ledgerBeforeRestart writes a finished run (slot 1, by RunOnce) and one
// without an outcome (slot 2, claimed under a grant then released) and
// returns Runs.
func ledgerBeforeRestart(t *testing.T, addr, name string) []dlock.Run {
	t.Helper()
	c := context.Background()
	l := locker(t, addr)
	defer l.Close()
	if _, err := l.RunOnce(c, name, dlock.Slot{Time: minute(1), Schedule: "every 1m0s"},
		func(context.Context, *dlock.Lease) error { return nil }); err != nil {
		t.Fatal(err)
	}
	ls, err := l.Acquire(c, name)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := ledgerOf(t, l).ClaimRun(c, run(name, 2, ls.Fence(), "gone/1"), false, 10); !ok || err != nil {
		t.Fatalf("ClaimRun = %v, %v", ok, err)
	}
	if err := ls.Release(c); err != nil {
		t.Fatal(err)
	}
	runs, err := l.Runs(c, name)
	if err != nil || len(runs) != 2 || runs[0].State != dlock.RunCrashed || runs[1].State != dlock.RunOK {
		t.Fatalf("Runs before the restart = %v, %v; want slot 2 crashed, slot 1 ok", runs, err)
	}
	return runs
}

// sameRuns compares runs field by field, times as instants.
func sameRuns(a, b []dlock.Run) bool {
	return slices.EqualFunc(a, b, func(x, y dlock.Run) bool {
		return x.Slot.Time.Equal(y.Slot.Time) && x.Slot.Schedule == y.Slot.Schedule && x.Owner == y.Owner &&
			x.Fence == y.Fence && x.Attempt == y.Attempt && x.Started.Equal(y.Started) && x.Ended.Equal(y.Ended) &&
			x.Status == y.Status && x.State == y.State
	})
}

// TestLedgerUnderRoot: the ledger lives under the Locker's own root,
// created (with its ancestors) by the first write, in the znode ROOT/%runs,
// which no lock name's escaped znode can be: a Locker on another root
// sees none of its runs, and a lock named "%runs" is a lock like any other.
func TestLedgerUnderRoot(t *testing.T) {
	srv := testserver.ZooKeeper(t)
	admin := connect(t, srv.Addr)
	c := context.Background()
	l, err := zklock.Config{Root: "/jobs/team-a", SessionTimeout: sessionTimeout}.Locker(connect(t, srv.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	slot := dlock.Slot{Time: minute(1), Schedule: "every 1m0s"}
	if _, err := l.RunOnce(c, "nightly/report", slot, func(context.Context, *dlock.Lease) error { return nil }); err != nil {
		t.Fatalf("RunOnce under /jobs/team-a: %v", err)
	}
	node := "/jobs/team-a/%runs/nightly%2Freport/" + slotNode(1)
	if ok, _, err := admin.Exists(node); !ok || err != nil {
		t.Errorf("%s exists = %v, %v; want the slot's record there", node, ok, err)
	}
	if runs, err := locker(t, srv.Addr).Runs(c, "nightly/report"); err != nil || len(runs) != 0 {
		t.Errorf("Runs on the default root = %v, %v; want none (another root's ledger)", runs, err)
	}
	ls, err := l.TryAcquire(c, "%runs")
	if err != nil {
		t.Fatalf("TryAcquire of a lock named %%runs: %v", err)
	}
	defer ls.Release(c) //nolint:errcheck // the test's end
	hs, err := l.List(c, "")
	if err != nil || len(hs) != 1 || hs[0].Name != "%runs" {
		t.Errorf("List = %+v, %v; want the lock named %%runs alone", hs, err)
	}
	if runs, err := l.Runs(c, "nightly/report"); err != nil || len(runs) != 1 || runs[0].State != dlock.RunOK {
		t.Errorf("Runs beside a lock named %%runs = %v, %v; want the one run, ok", runs, err)
	}
}
