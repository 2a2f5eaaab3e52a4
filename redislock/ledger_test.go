package redislock_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/internal/rediscore"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	"github.com/dlockdev/dlock/redislock"
	"github.com/redis/go-redis/v9"
)

// ledgerSlot is minute m of a fixed day.
func ledgerSlot(m int) time.Time {
	return time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(m) * time.Minute)
}

// ledgerOf returns l's run ledger.
func ledgerOf(t testing.TB, l *dlock.Locker) driver.Ledger {
	t.Helper()
	g, ok := l.Driver().(driver.Ledger)
	if !ok {
		t.Fatalf("%T is not a driver.Ledger", l.Driver())
	}
	return g
}

// runRec is a record of slot m under fence.
func runRec(name string, m int, fence uint64, owner string) driver.RunRecord {
	return driver.RunRecord{Name: name, Slot: ledgerSlot(m), Schedule: "every 1m0s", Owner: owner, Fence: fence,
		Attempt: 1, Started: time.Now()}
}

// TestLedgerSurvivesRestart: on a server with appendonly yes and
// appendfsync always, the run ledger outlives a SIGKILL and restart: the
// finished run and the crashed one are read back as they were written,
// the slot is still taken, and a write under a fence below the highest
// written before the crash is still refused.
func TestLedgerSurvivesRestart(t *testing.T) {
	srv := testserver.Redis(t, "--appendonly", "yes", "--appendfsync", "always")
	ctx := ctxT(t)
	name := "ledger/restart"
	l := locker(t, client(t, srv.Addr))
	ran, err := l.RunOnce(ctx, name, dlock.Slot{Time: ledgerSlot(1), Schedule: "every 1m0s"},
		func(context.Context, *dlock.Lease) error { return nil })
	if err != nil {
		t.Fatalf("RunOnce: %v", err)
	}
	ls, err := l.TryAcquire(ctx, name, dlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	crashed := runRec(name, 2, ls.Fence(), "crashed-host/7")
	if _, ok, err := ledgerOf(t, l).ClaimRun(ctx, crashed, false, 10); err != nil || !ok {
		t.Fatalf("ClaimRun = %v, %v", ok, err)
	}
	_ = ls.Release(ctx)
	before, err := ledgerOf(t, l).Runs(ctx, name)
	if err != nil || len(before) != 2 {
		t.Fatalf("Runs before the crash = %+v, %v", before, err)
	}
	_ = l.Close()

	srv.Crash()

	l = locker(t, client(t, srv.Addr))
	defer l.Close()
	after, err := ledgerOf(t, l).Runs(ctx, name)
	if err != nil || len(after) != 2 {
		t.Fatalf("Runs after SIGKILL and restart = %+v, %v; want the 2 runs written before", after, err)
	}
	for i := range after {
		if !sameRun(after[i], before[i]) {
			t.Errorf("run %d after the restart = %+v, want %+v", i, after[i], before[i])
		}
	}
	if after[1].Status != "ok" || after[1].Fence != ran.Fence || !after[0].Ended.IsZero() {
		t.Errorf("Runs after the restart = %+v; want slot 1 ok under fence %d, slot 2 without an outcome", after, ran.Fence)
	}
	_, err = l.RunOnce(ctx, name, dlock.Slot{Time: ledgerSlot(1), Schedule: "every 1m0s"},
		func(context.Context, *dlock.Lease) error {
			t.Error("a slot recorded before the restart ran again")
			return nil
		})
	if !errors.Is(err, dlock.ErrSlotTaken) {
		t.Errorf("RunOnce after the restart = %v, want ErrSlotTaken", err)
	}
	stale := runRec(name, 3, crashed.Fence-1, "stale")
	if _, _, err := ledgerOf(t, l).ClaimRun(ctx, stale, false, 10); !errors.Is(err, driver.ErrNotHeld) {
		t.Errorf("ClaimRun under a fence below the highest written before the restart = %v, want ErrNotHeld", err)
	}
}

// sameRun compares two records field by field (times with Equal).
func sameRun(a, b driver.RunRecord) bool {
	return a.Name == b.Name && a.Slot.Equal(b.Slot) && a.Schedule == b.Schedule && a.Owner == b.Owner &&
		a.Fence == b.Fence && a.Attempt == b.Attempt && a.Started.Equal(b.Started) && a.Ended.Equal(b.Ended) &&
		a.Status == b.Status
}

// TestLedgerFencedOnRedis: the ledger as Redis holds it: a hash of the name's
// records by slot, beside the highest fence a write carried as a decimal
// string (the script compares fences as such: above 2^53 a Lua number
// cannot tell them apart), and a sorted set that indexes the slots. A
// refused write leaves the hash as it was; a claim deletes the slots
// beyond the newest keep from the hash and its index alike, whatever
// order they were claimed in, a slot older than those kept at once.
func TestLedgerFencedOnRedis(t *testing.T) {
	srv := testserver.Redis(t)
	c := client(t, srv.Addr)
	ctx := ctxT(t)
	l := locker(t, c)
	defer l.Close()
	g := ledgerOf(t, l)
	name := "ledger/stored"
	const high = 1<<53 + 1 // 9007199254740993
	claim := func(rec driver.RunRecord, keep int) {
		t.Helper()
		if _, ok, err := g.ClaimRun(ctx, rec, false, keep); err != nil || !ok {
			t.Fatalf("ClaimRun of slot %s keeping %d = %v, %v", rec.Slot, keep, ok, err)
		}
	}
	cur := runRec(name, 1, high, "current")
	claim(cur, 10)
	field, stored, _ := rediscore.EncodeRun(cur)
	stale := runRec(name, 2, high-1, "stale")
	_, _, claimErr := g.ClaimRun(ctx, stale, false, 10)
	stale.Slot, stale.Ended, stale.Status = cur.Slot, time.Now(), "ok"
	if finishErr := g.FinishRun(ctx, stale); !errors.Is(claimErr, driver.ErrNotHeld) || !errors.Is(finishErr, driver.ErrNotHeld) {
		t.Fatalf("claim and outcome under fence %d after %d = %v, %v; want ErrNotHeld", stale.Fence, cur.Fence, claimErr, finishErr)
	}
	hash, err := c.HGetAll(ctx, keys.Runs(name)).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(hash) != 2 || hash[rediscore.RunsFence] != "9007199254740993" || hash[field] != stored {
		t.Errorf("ledger hash after the refused writes = %v; want only the current run and fence 9007199254740993", hash)
	}
	for _, m := range []int{5, 3, 4} {
		claim(runRec(name, m, high, "h"), 3)
	}
	expectSlots(t, g, c, name, 5, 4, 3)
	claim(runRec(name, 2, high, "old"), 3)
	expectSlots(t, g, c, name, 5, 4, 3)
	claim(runRec(name, 6, high, "h"), 1)
	expectSlots(t, g, c, name, 6)
}

// expectSlots checks that name's ledger holds exactly the slots of the
// given minutes, newest first, in Runs, the hash and its index.
func expectSlots(t *testing.T, g driver.Ledger, c redis.UniversalClient, name string, minutes ...int) {
	t.Helper()
	ctx := ctxT(t)
	runs, err := g.Runs(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	for _, r := range runs {
		got = append(got, int(r.Slot.Sub(ledgerSlot(0))/time.Minute))
	}
	if !slices.Equal(got, minutes) {
		t.Errorf("Runs kept slots %v, want %v", got, minutes)
	}
	fields, _ := c.HLen(ctx, keys.Runs(name)).Result()
	index, _ := c.ZCard(ctx, keys.RunSlots(name)).Result()
	if fields != int64(len(minutes))+1 || index != int64(len(minutes)) {
		t.Errorf("the ledger hash has %d fields and its index %d slots; want %d slots and the fence field",
			fields, index, len(minutes))
	}
}

// TestLedgerInvalid: a record the ledger cannot store, or a keep below 1,
// is an invalid argument naming the value, and nothing is written.
func TestLedgerInvalid(t *testing.T) {
	srv := testserver.Redis(t)
	c := client(t, srv.Addr)
	ctx := ctxT(t)
	l := locker(t, c)
	defer l.Close()
	g := ledgerOf(t, l)
	good := runRec("ledger/invalid", 1, 5, "h")
	cases := []struct {
		edit func(*driver.RunRecord)
		keep int
		want string
	}{
		{func(r *driver.RunRecord) {}, 0, "keep 0 runs"},
		{func(r *driver.RunRecord) { r.Slot = time.Time{} }, 10, "slot has no time"},
		{func(r *driver.RunRecord) { r.Slot = time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC) }, 10, "1960-01-01T00:00:00Z"},
		{func(r *driver.RunRecord) { r.Started = time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC) }, 10, "2300-01-01T00:00:00Z"},
		{func(r *driver.RunRecord) { r.Attempt = 0 }, 10, "attempt 0"},
		{func(r *driver.RunRecord) { r.Name = "" }, 10, "no name"},
	}
	for _, tc := range cases {
		rec := good
		tc.edit(&rec)
		_, _, err := g.ClaimRun(ctx, rec, false, tc.keep)
		if !errors.Is(err, dlock.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ClaimRun(%+v, keep %d) = %v, want an invalid argument naming %q", rec, tc.keep, err, tc.want)
		}
	}
	if n, _ := c.DBSize(ctx).Result(); n != 0 {
		t.Errorf("%d keys after the refused claims, want none", n)
	}
}

// TestLedgerReplicaSync: under Config.ReplicaSync a claim counts only
// once the replicas have it: right after ClaimRun the replica holds the
// record, and with the replica paused the claim is an error.
func TestLedgerReplicaSync(t *testing.T) {
	primary := testserver.Redis(t)
	replica := testserver.RedisReplica(t, primary)
	ctx := ctxT(t)
	l := lockerWith(t, client(t, primary.Addr), redislock.Config{ReplicaSync: 1, ReplicaTimeout: 200 * time.Millisecond})
	defer l.Close()
	g := ledgerOf(t, l)
	name := "ledger/replica"
	rec := runRec(name, 1, 10, "h")
	if _, ok, err := g.ClaimRun(ctx, rec, false, 10); err != nil || !ok {
		t.Fatalf("ClaimRun = %v, %v", ok, err)
	}
	field, _ := rediscore.RunField(rec.Slot)
	if v, err := client(t, replica.Addr).HGet(ctx, keys.Runs(name), field).Result(); err != nil || !strings.Contains(v, `"owner":"h"`) {
		t.Errorf("replica has %q, %v right after the claim; want the record", v, err)
	}
	replica.Pause()
	defer replica.Resume()
	if _, ok, err := g.ClaimRun(ctx, runRec(name, 2, 11, "h"), false, 10); err == nil || ok || !strings.Contains(err.Error(), "replicas") {
		t.Errorf("ClaimRun with the replica paused = %v, %v; want an error saying the replicas did not confirm it", ok, err)
	}
}
