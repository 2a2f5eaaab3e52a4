package dlocktest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/driver"
)

// testLedgerFenceOrder: a write under a fence below the highest the
// name's ledger has seen is refused with ErrNotHeld and writes nothing,
// a claim of a new slot and an outcome alike. Fences compare as numbers:
// 9 is below 10 (not as strings), 2^53 below 2^53+1 (not as float64s, in
// which they are one number). A claim of a slot that has a record returns
// that record, not claimed; an outcome under a fence other than its
// record's is refused.
func (s *suite) testLedgerFenceOrder(t *testing.T) {
	c := s.ledgerCalls(t, s.name(t))
	c.claimed(c.rec(1, 10, "a"), false, 10)
	c.refusedClaim(c.rec(2, 9, "stale"))
	c.refusedFinish(c.rec(1, 9, "stale"))
	c.expectRuns("1:a:10:1:-")
	if got := c.taken(c.rec(1, 11, "b"), false, 10, "a"); got.Name != c.name || got.Fence != 10 || got.Attempt != 1 || !got.Ended.IsZero() {
		t.Errorf("ClaimRun of a taken slot returned %+v; want a's record of %q: fence 10, attempt 1, no outcome", got, c.name)
	}
	const high = 1<<53 + 1 // 9007199254740993
	c.claimed(c.rec(2, high, "high"), false, 10)
	c.refusedClaim(c.rec(3, high-1, "stale"))
	c.refusedFinish(c.rec(2, high-1, "stale"))
	c.refusedFinish(c.rec(2, high+1, "other")) // not the fence of slot 2's record
	c.expectRuns("2:high:9007199254740993:1:-", "1:a:10:1:-")
}

// testLedgerRerun: with rerun, a claim replaces the slot's record only if
// it has no outcome and a lower fence; an outcome under the replaced
// record's fence is then refused, and the rerun's recorded; a record with
// an outcome is never replaced, even with rerun.
func (s *suite) testLedgerRerun(t *testing.T) {
	c := s.ledgerCalls(t, s.name(t))
	c.claimed(c.rec(1, 10, "a"), false, 10)
	c.taken(c.rec(1, 11, "b"), false, 10, "a")
	rerun := c.rec(1, 12, "c")
	rerun.Attempt = 2
	c.claimed(rerun, true, 10)
	c.refusedFinish(c.rec(1, 11, "b"))
	if err := c.finish(rerun, "exit status 3"); err != nil {
		t.Fatalf("FinishRun of the rerun: %v", err)
	}
	if got := c.taken(c.rec(1, 13, "d"), true, 10, "c"); got.Attempt != 2 {
		t.Errorf("rerun of a finished slot returned attempt %d, want c's record, attempt 2", got.Attempt)
	}
	c.expectRuns("1:c:12:2:exit status 3")
}

// testLedgerTrim: a claim keeps the newest keep slots of its name,
// whatever order they are claimed in, and leaves other names' records
// alone; a claim that finds its slot taken trims nothing; a slot older
// than all those kept is claimed, and gone by the next claim's trim at
// the latest; a smaller keep trims at the next claim.
func (s *suite) testLedgerTrim(t *testing.T) {
	c := s.ledgerCalls(t, s.name(t))
	other := c.of(s.name(t, "other"))
	other.claimed(other.rec(1, 1, "o"), false, 100)
	for _, m := range []int{5, 1, 9, 3, 7, 8} {
		c.claimed(c.rec(m, 1, "a"), false, 3)
	}
	kept := []string{"9:a:1:1:-", "8:a:1:1:-", "7:a:1:1:-"}
	c.expectRuns(kept...)
	c.taken(c.rec(8, 1, "b"), false, 1, "a")
	c.expectRuns(kept...)
	c.claimed(c.rec(2, 1, "old"), false, 3)
	if got := c.runs(); !slices.Equal(got, kept) && !slices.Equal(got, slices.Concat(kept, []string{"2:old:1:1:-"})) {
		t.Fatalf("Runs after a claim of a slot older than the 3 kept = %q; want %q, with or without the old slot", got, kept)
	}
	c.claimed(c.rec(10, 1, "a"), false, 2)
	c.expectRuns("10:a:1:1:-", "9:a:1:1:-")
	other.expectRuns("1:o:1:1:-")
}

// contenders is how many callers ClaimContended has claim each slot.
const contenders = 8

// ClaimContended checks the run ledger of the Lockers open makes, whose
// every write one authority decides in one step (a transaction, a
// ZooKeeper multi, an SQL statement, a script): 8 callers that do not
// hold the lock, each on a Locker of its own, claim the same slot at
// once, for the given number of slots: on even slots all under one fence
// (so the fence refuses none of them, and the slot's record alone
// decides), on odd slots each under its own. The ledger's writes alone
// let exactly one claim each slot; every other caller gets that claim's
// record or, its fence being below one already written, ErrNotHeld. The
// ledger's fence is then the highest any caller carried, never lowered by
// a caller that read it before a higher one wrote: a write under one less
// is refused.
//
// Run does not check this: the portable layer claims a slot only while it
// holds the lock, and a ledger kept by a majority of nodes (redlock)
// needs that lock to decide between claims made at once. A driver whose
// ledger decides them alone calls ClaimContended from its own tests.
func ClaimContended(t *testing.T, open func(t testing.TB) *dlock.Locker, slots int) {
	if open == nil || slots < 1 {
		t.Fatalf("dlocktest.ClaimContended: open nil (%v) or %d slots: want a func and 1 slot or more", open == nil, slots)
	}
	s := &suite{h: Harness{New: open}, ttl: DefaultTTL, runID: randomID()}
	cs := make([]ledgerCalls, contenders)
	for i := range cs {
		cs[i] = s.ledgerCalls(t, s.name(t))
	}
	refused := 0
	for m := range slots {
		got, oks, errs := claimAtOnce(cs, m)
		refused += oneClaim(t, m, got, oks, errs)
		top := uint64(1000*(m+1) + (contenders-1)*(m%2))
		cs[0].refusedClaim(cs[0].rec(100+m, top-1, "probe"))
	}
	if runs := cs[0].runs(); len(runs) != slots {
		t.Fatalf("Runs: %d records, want %d", len(runs), slots)
	}
	t.Logf("%d slots, %d callers each: one claim per slot; %d of %d losers refused by the fence, the rest got the winner's record",
		slots, contenders, refused, slots*(contenders-1))
}

// claimAtOnce has each caller i claim slot m as "caller-i" at the same
// moment, under fence 1000(m+1), plus i on odd slots.
func claimAtOnce(cs []ledgerCalls, m int) (got []driver.RunRecord, oks []bool, errs []error) {
	got, oks, errs = make([]driver.RunRecord, len(cs)), make([]bool, len(cs)), make([]error, len(cs))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, c := range cs {
		fence := uint64(1000 * (m + 1))
		if m%2 == 1 {
			fence += uint64(i)
		}
		rec := c.rec(m, fence, fmt.Sprintf("caller-%d", i))
		wg.Go(func() {
			<-start
			got[i], oks[i], errs[i] = c.g.ClaimRun(c.ctx, rec, false, 1000)
		})
	}
	close(start)
	wg.Wait()
	return got, oks, errs
}

// oneClaim checks the answers to claims of slot m: exactly one claimed
// it, and every other caller got its record or ErrNotHeld. It returns how
// many were refused.
func oneClaim(t *testing.T, m int, got []driver.RunRecord, oks []bool, errs []error) (refused int) {
	t.Helper()
	winner := slices.Index(oks, true)
	if winner < 0 || slices.Index(oks[winner+1:], true) >= 0 {
		t.Fatalf("slot %d claimed by %v (%v), want exactly one caller", m, oks, errs)
	}
	for i := range oks {
		switch {
		case i == winner:
		case errors.Is(errs[i], driver.ErrNotHeld):
			refused++
		case errs[i] != nil:
			t.Fatalf("slot %d: caller-%d: %v", m, i, errs[i])
		case got[i].Owner != fmt.Sprintf("caller-%d", winner):
			t.Fatalf("slot %d: caller-%d got %+v, want caller-%d's record", m, i, got[i], winner)
		}
	}
	return refused
}
