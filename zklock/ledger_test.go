package zklock_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/dlocktest"
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

// TestLedgerFencedInZooKeeper: the ledger as ZooKeeper holds it, read with a
// plain connection: under the name's znode, escaped as its lock's is,
// which holds the highest fence a write carried, one znode per slot. A
// refused write changes nothing (the fence znode's version stays); a
// claim that finds its slot taken raises the fence alone, so the record's
// own runner can no longer record an outcome; a claim deletes the znodes
// of slots beyond the newest keep in its own transaction, and a slot
// older than those kept is recorded, and dropped by the next claim's trim.
func TestLedgerFencedInZooKeeper(t *testing.T) {
	srv := testserver.ZooKeeper(t)
	admin := connect(t, srv.Addr)
	g := ledgerOf(t, locker(t, srv.Addr))
	c := context.Background()
	name := "stored/a job" // a "/" and a space: escaped as the lock's znode is
	claim := func(rec driver.RunRecord, keep int) error {
		_, _, err := g.ClaimRun(c, rec, false, keep)
		return err
	}
	if err := claim(run(name, 1, 10, "a"), 10); err != nil {
		t.Fatal(err)
	}
	v := wantStored(t, admin, name, []string{"1:a:10:1:-"}, "10")
	stale := run(name, 1, 9, "stale")
	stale.Ended, stale.Status = time.Now(), "ok"
	claimErr, finishErr := claim(run(name, 2, 9, "stale"), 10), g.FinishRun(c, stale)
	if !errors.Is(claimErr, driver.ErrNotHeld) || !errors.Is(finishErr, driver.ErrNotHeld) {
		t.Fatalf("claim and outcome at fence 9 after 10 = %v, %v; want ErrNotHeld", claimErr, finishErr)
	}
	if v2 := wantStored(t, admin, name, []string{"1:a:10:1:-"}, "10"); v2 != v {
		t.Errorf("the refused writes changed the fence znode: version %d, was %d", v2, v)
	}
	if err := claim(run(name, 1, 11, "b"), 10); err != nil {
		t.Fatal(err)
	}
	done := run(name, 1, 10, "a")
	done.Ended, done.Status = time.Now(), "ok"
	if err := g.FinishRun(c, done); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("FinishRun at fence 10 after a claim of its taken slot at 11 = %v; want ErrNotHeld", err)
	}
	wantStored(t, admin, name, []string{"1:a:10:1:-"}, "11")
	if err := errors.Join(claim(run(name, 3, 11, "h"), 10), claim(run(name, 2, 11, "h"), 2)); err != nil {
		t.Fatal(err)
	}
	wantStored(t, admin, name, []string{"3:h:11:1:-", "2:h:11:1:-"}, "11")
	if err := claim(run(name, 0, 11, "old"), 2); err != nil {
		t.Fatal(err)
	}
	wantStored(t, admin, name, []string{"3:h:11:1:-", "2:h:11:1:-", "0:old:11:1:-"}, "11")
	if err := claim(run(name, 4, 11, "h"), 2); err != nil {
		t.Fatal(err)
	}
	wantStored(t, admin, name, []string{"4:h:11:1:-", "3:h:11:1:-"}, "11")
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

// TestLedgerClaimContended: the multi() of each write alone decides
// between claims of one slot made at once by 8 callers that do not hold
// the lock, each on a session of its own, for 10 slots.
func TestLedgerClaimContended(t *testing.T) {
	srv := testserver.ZooKeeper(t)
	dlocktest.ClaimContended(t, func(t testing.TB) *dlock.Locker { return locker(t, srv.Addr) }, 10)
}
