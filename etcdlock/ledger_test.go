package etcdlock_test

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

// TestLedgerFencedInEtcd: the ledger as etcd holds it, read with a plain
// client. The fence key holds the highest fence a write carried, padded
// to 20 digits so that the transaction's byte-wise comparison orders
// fences as numbers; each slot's record is a key of its own, named by the
// slot's Unix nanoseconds. A refused write changes nothing in etcd (its
// revision stays); a claim that finds its slot taken raises the fence key
// alone, so the record's own runner can no longer record an outcome; a
// claim deletes the keys of slots beyond the newest keep, a slot older
// than those kept at once, and keeps the fence key.
func TestLedgerFencedInEtcd(t *testing.T) {
	srv := testserver.Etcd(t)
	admin := client(t, srv.Endpoint)
	g := ledgerOf(t, locker(t, srv.Endpoint))
	ctx := ledgerCtx(t)
	name := "stored"
	claim := func(rec driver.RunRecord, keep int) error {
		t.Helper()
		_, _, err := g.ClaimRun(ctx, rec, false, keep)
		return err
	}
	if err := claim(runRec(name, 1, 10, "a"), 10); err != nil {
		t.Fatal(err)
	}
	rev := revision(t, admin)
	stale := runRec(name, 1, 9, "stale")
	stale.Ended, stale.Status = time.Now(), "ok"
	claimErr, finishErr := claim(runRec(name, 2, 9, "stale"), 10), g.FinishRun(ctx, stale)
	if !errors.Is(claimErr, driver.ErrNotHeld) || !errors.Is(finishErr, driver.ErrNotHeld) {
		t.Fatalf("claim and outcome at fence 9 after 10 = %v, %v; want ErrNotHeld", claimErr, finishErr)
	}
	if r := revision(t, admin); r != rev {
		t.Errorf("the refused writes moved etcd's revision from %d to %d", rev, r)
	}
	wantKeys(t, admin, name, "00000000000000000010", "1:a:10:1:-")
	if err := claim(runRec(name, 1, 11, "b"), 10); err != nil {
		t.Fatal(err)
	}
	done := runRec(name, 1, 10, "a")
	done.Ended, done.Status = time.Now(), "ok"
	if err := g.FinishRun(ctx, done); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("FinishRun at fence 10 after a claim of its taken slot at 11 = %v; want ErrNotHeld", err)
	}
	wantKeys(t, admin, name, "00000000000000000011", "1:a:10:1:-")
	if err := errors.Join(claim(runRec(name, 3, 12, "h"), 10), claim(runRec(name, 2, 12, "h"), 2)); err != nil {
		t.Fatal(err)
	}
	wantKeys(t, admin, name, "00000000000000000012", "3:h:12:1:-", "2:h:12:1:-")
	if err := claim(runRec(name, 0, 13, "old"), 2); err != nil {
		t.Fatal(err)
	}
	wantKeys(t, admin, name, "00000000000000000013", "3:h:12:1:-", "2:h:12:1:-")
}

// revision is etcd's store revision, which every write moves.
func revision(t *testing.T, cli *clientv3.Client) int64 {
	t.Helper()
	resp, err := cli.Get(ledgerCtx(t), "revision")
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.Revision
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

// TestLedgerClaimContended: the transactions alone decide between claims
// of one slot made at once by 8 callers that do not hold the lock, each
// on a client of its own, for 20 slots.
func TestLedgerClaimContended(t *testing.T) {
	srv := testserver.Etcd(t)
	dlocktest.ClaimContended(t, func(t testing.TB) *dlock.Locker { return locker(t, srv.Endpoint) }, 20)
}
