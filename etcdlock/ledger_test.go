package etcdlock_test

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
	"github.com/dlockdev/dlock/etcdlock"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ledgerSlot is minute m of a fixed day.
func ledgerSlot(m int) time.Time {
	return time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(m) * time.Minute)
}

// runRec is a record of name's slot m under fence, without an outcome.
func runRec(name string, m int, fence uint64, owner string) driver.RunRecord {
	return driver.RunRecord{Name: name, Slot: ledgerSlot(m), Schedule: "every 1m0s", Owner: owner, Fence: fence,
		Attempt: 1, Started: time.Now()}
}

// ledgerOf returns l's run ledger.
func ledgerOf(t testing.TB, l *dlock.Locker) driver.Ledger {
	t.Helper()
	g, ok := l.Driver().(driver.Ledger)
	if !ok {
		t.Fatalf("%T does not implement driver.Ledger", l.Driver())
	}
	return g
}

func ledgerCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// ledgerKeys reads the keys of the ledger of name under prefix as etcd
// holds them: the fence key's value, and "minute:owner:fence:attempt:
// status" per record ("-" for no outcome), newest slot first.
func ledgerKeys(t testing.TB, cli *clientv3.Client, prefix, name string) (fence string, recs []string) {
	t.Helper()
	resp, err := cli.Get(ledgerCtx(t), prefix+"%runs/"+name, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend))
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range resp.Kvs {
		slot, ok := strings.CutPrefix(string(kv.Key), prefix+"%runs/"+name+"/")
		if !ok {
			if string(kv.Key) == prefix+"%runs/"+name {
				fence = string(kv.Value)
			}
			continue
		}
		r, err := decode(string(kv.Value))
		if err != nil {
			t.Fatalf("key %s: %v", kv.Key, err)
		}
		if want := fmt.Sprintf("%019d", r.Slot.UnixNano()); slot != want {
			t.Errorf("record of slot %s under key ...%s, want ...%s", r.Slot, slot, want)
		}
		status := r.Status
		if r.Ended.IsZero() {
			status = "-"
		}
		recs = append(recs, fmt.Sprintf("%d:%s:%d:%d:%s", int(r.Slot.Sub(ledgerSlot(0))/time.Minute), r.Owner, r.Fence, r.Attempt, status))
	}
	return fence, recs
}

// decode reads a record's JSON as a reader with etcdctl would.
func decode(v string) (driver.RunRecord, error) {
	var r struct {
		Slot, Started, Ended time.Time
		Owner, Status        string
		Fence                uint64
		Attempt              int
	}
	err := json.Unmarshal([]byte(v), &r)
	return driver.RunRecord{Slot: r.Slot, Owner: r.Owner, Fence: r.Fence, Attempt: r.Attempt, Started: r.Started,
		Ended: r.Ended, Status: r.Status}, err
}

func wantKeys(t testing.TB, cli *clientv3.Client, name, fence string, recs ...string) {
	t.Helper()
	f, got := ledgerKeys(t, cli, etcdlock.DefaultPrefix, name)
	if f != fence || !slices.Equal(got, recs) {
		t.Fatalf("etcd holds fence %q and records %q; want %q and %q", f, got, fence, recs)
	}
}

// TestLedgerFencedInEtcd: the transaction itself refuses a write under a
// fence below the highest the name's ledger has seen, and then writes
// nothing (read back from etcd): a claim of a new slot, an outcome. Fences
// 9 and 10 compare wrongly as unpadded strings ("9" > "10"). A claim of a
// taken slot returns its record and raises the fence; a rerun replaces
// only a record without an outcome under a lower fence; an outcome for a
// record that is no longer its run's is refused.
func TestLedgerFencedInEtcd(t *testing.T) {
	srv := testserver.Etcd(t)
	admin := client(t, srv.Endpoint)
	g := ledgerOf(t, locker(t, srv.Endpoint))
	ctx := ledgerCtx(t)
	name := "fenced"
	if _, ok, err := g.ClaimRun(ctx, runRec(name, 1, 10, "a"), false, 10); !ok || err != nil {
		t.Fatalf("ClaimRun at fence 10 = %v, %v", ok, err)
	}
	if _, ok, err := g.ClaimRun(ctx, runRec(name, 2, 9, "stale"), false, 10); ok || !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("ClaimRun at fence 9 after 10 = %v, %v; want ErrNotHeld", ok, err)
	}
	stale := runRec(name, 1, 9, "stale")
	stale.Ended, stale.Status = time.Now(), "ok"
	if err := g.FinishRun(ctx, stale); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("FinishRun at fence 9 after 10 = %v; want ErrNotHeld", err)
	}
	wantKeys(t, admin, name, "00000000000000000010", "1:a:10:1:-")

	got, ok, err := g.ClaimRun(ctx, runRec(name, 1, 11, "b"), false, 10)
	if ok || err != nil || got.Owner != "a" || got.Fence != 10 || !got.Slot.Equal(ledgerSlot(1)) || !got.Ended.IsZero() {
		t.Errorf("ClaimRun of a taken slot = %+v, %v, %v; want a's record, not claimed", got, ok, err)
	}
	done := runRec(name, 1, 10, "a")
	done.Ended, done.Status = time.Now(), "ok"
	if err := g.FinishRun(ctx, done); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("FinishRun at fence 10 after 11 = %v; want ErrNotHeld", err)
	}
	wantKeys(t, admin, name, "00000000000000000011", "1:a:10:1:-")

	rerun := runRec(name, 1, 12, "c")
	rerun.Attempt = 2
	if _, ok, err := g.ClaimRun(ctx, rerun, true, 10); !ok || err != nil {
		t.Fatalf("rerun at fence 12 = %v, %v", ok, err)
	}
	wrong := runRec(name, 1, 11, "b")
	wrong.Ended, wrong.Status = time.Now(), "ok"
	if err := g.FinishRun(ctx, wrong); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("FinishRun at fence 11 of fence 12's record = %v; want ErrNotHeld", err)
	}
	rerun.Ended, rerun.Status = time.Now(), "exit status 3"
	if err := g.FinishRun(ctx, rerun); err != nil {
		t.Fatalf("FinishRun of the rerun: %v", err)
	}
	if got, ok, err := g.ClaimRun(ctx, runRec(name, 1, 13, "d"), true, 10); ok || err != nil || got.Owner != "c" || got.Attempt != 2 {
		t.Errorf("rerun of a finished slot = %+v, %v, %v; want c's record, not claimed", got, ok, err)
	}
	wantKeys(t, admin, name, "00000000000000000013", "1:c:12:2:exit status 3")
}

// TestLedgerTrim: a claim keeps the newest keep slots of its name, in
// whatever order they are claimed (other names' untouched); a slot older
// than all those kept is claimed and dropped at once; a smaller keep
// trims at the next claim. The fence key stays.
func TestLedgerTrim(t *testing.T) {
	srv := testserver.Etcd(t)
	admin := client(t, srv.Endpoint)
	g := ledgerOf(t, locker(t, srv.Endpoint))
	ctx := ledgerCtx(t)
	name, other := "trim", "trim-other"
	fence := uint64(100)
	claim := func(name string, m, keep int) {
		t.Helper()
		fence++
		if _, ok, err := g.ClaimRun(ctx, runRec(name, m, fence, "h"), false, keep); !ok || err != nil {
			t.Fatalf("ClaimRun slot %d keep %d = %v, %v", m, keep, ok, err)
		}
	}
	claim(other, 1, 100) // fence 101
	for _, m := range []int{5, 1, 9, 3, 7, 8} {
		claim(name, m, 3) // fences 102 to 107
	}
	wantKeys(t, admin, name, "00000000000000000107", "9:h:104:1:-", "8:h:107:1:-", "7:h:106:1:-")
	claim(name, 2, 3)
	wantKeys(t, admin, name, "00000000000000000108", "9:h:104:1:-", "8:h:107:1:-", "7:h:106:1:-")
	claim(name, 10, 1)
	wantKeys(t, admin, name, "00000000000000000109", "10:h:109:1:-")
	wantKeys(t, admin, other, "00000000000000000101", "1:h:101:1:-")
	runs, err := g.Runs(ctx, name)
	if err != nil || len(runs) != 1 || !runs[0].Slot.Equal(ledgerSlot(10)) {
		t.Errorf("Runs = %+v, %v; want slot 10 alone", runs, err)
	}
}

// TestLedgerInvalid: a record the ledger cannot store, or a keep below 1,
// is an invalid argument naming the value, and nothing is written.
func TestLedgerInvalid(t *testing.T) {
	srv := testserver.Etcd(t)
	admin := client(t, srv.Endpoint)
	g := ledgerOf(t, locker(t, srv.Endpoint))
	ctx := ledgerCtx(t)
	good := runRec("invalid", 1, 5, "h")
	cases := []struct {
		edit func(*driver.RunRecord)
		keep int
		want string
	}{
		{func(r *driver.RunRecord) {}, 0, "keep 0 runs"},
		{func(r *driver.RunRecord) {}, -3, "keep -3 runs"},
		{func(r *driver.RunRecord) { r.Slot = time.Time{} }, 10, "slot has no time"},
		{func(r *driver.RunRecord) { r.Slot = time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC) }, 10, "1960-01-01T00:00:00Z"},
		{func(r *driver.RunRecord) { r.Slot = time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC) }, 10, "2300-01-01T00:00:00Z"},
		{func(r *driver.RunRecord) { r.Started = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }, 10, "10000-01-01T00:00:00Z"},
		{func(r *driver.RunRecord) { r.Attempt = 0 }, 10, "attempt 0"},
		{func(r *driver.RunRecord) { r.Name = "" }, 10, "no name"},
	}
	for _, tc := range cases {
		rec := good
		tc.edit(&rec)
		_, _, err := g.ClaimRun(ctx, rec, false, tc.keep)
		if !errors.Is(err, dlock.ErrInvalidArgument) || !errors.Is(err, driver.ErrPermanent) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ClaimRun(%+v, keep %d) = %v, want a permanent invalid argument naming %q", rec, tc.keep, err, tc.want)
		}
	}
	bad := good
	bad.Slot, bad.Ended, bad.Status = time.Time{}, time.Now(), "ok"
	if err := g.FinishRun(ctx, bad); !errors.Is(err, dlock.ErrInvalidArgument) || !strings.Contains(err.Error(), "slot has no time") {
		t.Errorf("FinishRun of a slot without a time = %v, want an invalid argument naming it", err)
	}
	resp, err := admin.Get(ctx, "", clientv3.WithFromKey(), clientv3.WithCountOnly())
	if err != nil || resp.Count != 0 {
		t.Errorf("etcd holds %d keys after the refused writes (%v), want none", resp.Count, err)
	}
}

// TestLedgerSurvivesRestart: etcd keeps the run ledger across a SIGKILL
// and restart of the server on its data directory: the finished run and
// the crashed one are read back as they were written, the slot is still
// taken, and a write under a fence below the highest written before the
// crash is still refused.
func TestLedgerSurvivesRestart(t *testing.T) {
	srv := testserver.Etcd(t)
	ctx := ledgerCtx(t)
	name := "restart"
	slot := dlock.Slot{Time: ledgerSlot(1), Schedule: "every 1m0s"}
	l := locker(t, srv.Endpoint)
	if _, err := l.RunOnce(ctx, name, slot, func(context.Context, *dlock.Lease) error { return nil }); err != nil {
		t.Fatalf("RunOnce: %v", err)
	}
	ls, err := l.TryAcquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	crashed := runRec(name, 2, ls.Fence(), "crashed-host/7")
	if _, ok, err := ledgerOf(t, l).ClaimRun(ctx, crashed, false, 10); !ok || err != nil {
		t.Fatalf("ClaimRun = %v, %v", ok, err)
	}
	if err := ls.Release(ctx); err != nil {
		t.Fatal(err)
	}
	before, err := l.Runs(ctx, name)
	if err != nil || len(before) != 2 || before[0].State != dlock.RunCrashed || before[1].State != dlock.RunOK {
		t.Fatalf("Runs before the crash = %v, %v; want slot 2 crashed, slot 1 ok", before, err)
	}
	_ = l.Close()

	srv.Kill()
	srv.Start()

	l = locker(t, srv.Endpoint)
	after, err := l.Runs(ctx, name)
	if err != nil || !slices.EqualFunc(after, before, sameRun) {
		t.Fatalf("Runs after SIGKILL and restart = %v, %v\nwant as before: %v", after, err, before)
	}
	_, err = l.RunOnce(ctx, name, slot, func(context.Context, *dlock.Lease) error {
		t.Error("a slot recorded before the restart ran again")
		return nil
	})
	if !errors.Is(err, dlock.ErrSlotTaken) {
		t.Errorf("RunOnce after the restart = %v, want ErrSlotTaken", err)
	}
	stale := runRec(name, 3, crashed.Fence-1, "stale")
	if _, ok, err := ledgerOf(t, l).ClaimRun(ctx, stale, false, 10); ok || !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("ClaimRun under a fence below the highest written before the restart = %v, %v; want ErrNotHeld", ok, err)
	}
}

// sameRun compares runs field by field, times as instants.
func sameRun(a, b dlock.Run) bool {
	return a.Slot.Time.Equal(b.Slot.Time) && a.Slot.Schedule == b.Slot.Schedule && a.Owner == b.Owner &&
		a.Fence == b.Fence && a.Attempt == b.Attempt && a.Started.Equal(b.Started) && a.Ended.Equal(b.Ended) &&
		a.Status == b.Status && a.State == b.State
}

// TestLedgerKeysApart: the ledger's keys live under the Locker's prefix
// and apart from every lock's: with records of a name, a lock named
// "runs" (or "%runs") is free and List shows no ledger key as a lock;
// a Locker under another prefix has a ledger of its own.
func TestLedgerKeysApart(t *testing.T) {
	srv := testserver.Etcd(t)
	admin := client(t, srv.Endpoint)
	ctx := ledgerCtx(t)
	l := locker(t, srv.Endpoint)
	if _, err := l.RunOnce(ctx, "job", dlock.Slot{Time: ledgerSlot(1), Schedule: "every 1m0s"},
		func(context.Context, *dlock.Lease) error { return nil }); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"runs", "%runs", "runs/job"} {
		ls, err := l.TryAcquire(ctx, name)
		if err != nil {
			t.Fatalf("TryAcquire(%q) beside the ledger: %v", name, err)
		}
		defer func() { _ = ls.Release(ctx) }()
	}
	hs, err := l.List(ctx, "")
	var names []string
	for _, h := range hs {
		names = append(names, h.Name)
	}
	slices.Sort(names)
	if err != nil || !slices.Equal(names, []string{"%runs", "runs", "runs/job"}) {
		t.Errorf("List = %q, %v; want the three locks and no ledger key", names, err)
	}
	other, err := etcdlock.Config{Prefix: "app2/", ElectionTimeout: testserver.SingleElectionTimeout}.Locker(client(t, srv.Endpoint))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if runs, err := other.Runs(ctx, "job"); err != nil || len(runs) != 0 {
		t.Errorf("Runs under another prefix = %v, %v; want none", runs, err)
	}
	if _, err := other.RunOnce(ctx, "job", dlock.Slot{Time: ledgerSlot(1), Schedule: "every 1m0s"},
		func(context.Context, *dlock.Lease) error { return nil }); err != nil {
		t.Errorf("RunOnce of the same slot under another prefix: %v", err)
	}
	if _, recs := ledgerKeys(t, admin, "app2/", "job"); len(recs) != 1 {
		t.Errorf("records under app2/%%runs/job = %q, want one", recs)
	}
}

// TestLedgerClaimContended: 8 callers that do not hold the lock claim the
// same slot at once, each on a client of its own, for 20 slots: on even
// slots all under one fence (so the fence refuses none, and the slot's
// record alone decides), on odd slots each under its own. The
// transactions alone let exactly one claim each slot; every other caller
// gets that claim's record or, its fence being below one already written,
// ErrNotHeld.
func TestLedgerClaimContended(t *testing.T) {
	srv := testserver.Etcd(t)
	const callers, slots = 8, 20
	ledgers := make([]driver.Ledger, callers)
	for i := range ledgers {
		ledgers[i] = ledgerOf(t, locker(t, srv.Endpoint))
	}
	ctx := ledgerCtx(t)
	name := "contended"
	refused := 0
	for m := range slots {
		var (
			wg    sync.WaitGroup
			start = make(chan struct{})
			got   [callers]driver.RunRecord
			oks   [callers]bool
			errs  [callers]error
		)
		for i := range callers {
			wg.Go(func() {
				<-start
				fence := uint64(1000 * (m + 1))
				if m%2 == 1 {
					fence += uint64(i)
				}
				got[i], oks[i], errs[i] = ledgers[i].ClaimRun(ctx, runRec(name, m, fence, fmt.Sprintf("caller-%d", i)), false, 1000)
			})
		}
		close(start)
		wg.Wait()
		winner := slices.Index(oks[:], true)
		if winner < 0 || slices.Index(oks[winner+1:], true) >= 0 {
			t.Fatalf("slot %d claimed by %v (%v), want exactly one caller", m, oks, errs)
		}
		for i := range callers {
			switch {
			case i == winner:
			case errors.Is(errs[i], driver.ErrNotHeld):
				refused++
			case errs[i] != nil:
				t.Fatalf("caller-%d: %v", i, errs[i])
			case got[i].Owner != fmt.Sprintf("caller-%d", winner):
				t.Fatalf("slot %d: caller-%d got %+v, want caller-%d's record", m, i, got[i], winner)
			}
		}
	}
	runs, err := ledgers[0].Runs(ctx, name)
	if err != nil || len(runs) != slots {
		t.Fatalf("Runs: %d records, %v; want %d", len(runs), err, slots)
	}
	t.Logf("%d slots, %d callers each: one claim per slot; %d of %d losers refused by the fence, the rest got the winner's record",
		slots, callers, refused, slots*(callers-1))
}
