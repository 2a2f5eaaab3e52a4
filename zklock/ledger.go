package zklock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/dlockdev/dlock/driver"
	"github.com/go-zookeeper/zk"
)

// The run ledger (driver.Ledger) lives beside the locks, under the root:
// ROOT/%runs/escape(NAME) is a name's ledger, a persistent znode whose
// data is the highest fence a write to it has carried, and its children,
// one persistent znode per recorded slot (the slot's Unix nanoseconds in
// 19 digits), hold the records as JSON (ledger_record.go). Persistent,
// not ephemeral: a record outlives its runner's session, which is the
// point of it, and the fence outlives the records the trim drops.
//
// Every write is one multi() that begins with a conditional write of the
// name's znode: its data set to the write's fence, at the version read
// before deciding (or its creation, when the ledger is new). So the writes
// to one name's ledger are applied one at a time, each decided on the
// state it read: a write whose read went stale (another write came in
// between, or the session's server lagged the leader) fails as a whole
// with a version conflict and is decided again on a fresh read, at most
// ledgerTries times. Since every change of a ledger's children is such a
// multi, the children read at a version are the children at that
// version, and the trim's deletes go in the same multi as the claim.
//
// A write under a fence below the znode's is refused (driver.ErrNotHeld)
// and writes nothing; any other write raises the znode's fence to its
// own, a claim that finds its slot taken included (it returns the record
// it read, unchanged by the same multi), as the other backends do.

// ledgerTries bounds the reads a ledger write makes when other writes
// keep changing the ledger under it.
const ledgerTries = 8

// ClaimRun implements driver.Ledger: one multi that raises the fence,
// creates the slot's znode (or, with rerun, replaces a record without an
// outcome under a lower fence) and deletes the slots beyond the newest
// keep. The claimed slot is never the one deleted: a claim of a slot
// older than the kept ones leaves keep+1 until the next claim.
func (d *zkDriver) ClaimRun(ctx context.Context, rec driver.RunRecord, rerun bool, keep int) (driver.RunRecord, bool, error) {
	if keep < 1 {
		return driver.RunRecord{}, false, invalidRun("keep %d runs of %q: want 1 or more", keep, rec.Name)
	}
	slot, data, err := encodeRun(rec)
	if err != nil {
		return driver.RunRecord{}, false, err
	}
	dir := d.ledgerDir(rec.Name)
	for range ledgerTries {
		p, err := d.planClaim(ctx, dir, rec, slot, data, rerun, keep)
		switch {
		case errors.Is(err, errStale):
			continue
		case err != nil:
			return driver.RunRecord{}, false, err
		case p.ops == nil:
			return p.got, p.claimed, nil
		}
		if err := d.ledgerMulti(ctx, dir, p.ops); !retry(err) {
			if err != nil {
				return driver.RunRecord{}, false, err
			}
			return p.got, p.claimed, nil
		}
	}
	return driver.RunRecord{}, false, changing(rec.Name)
}

// claimPlan is what a claim decided from one read of the ledger: the
// multi to send (none when the read alone answers), then its answer.
type claimPlan struct {
	ops     []any
	got     driver.RunRecord
	claimed bool
}

// planClaim reads the ledger and decides rec's claim of slot (data being
// rec's record): refused, the slot's record kept (raising the fence,
// checking the record is still the one read), or the slot claimed.
func (d *zkDriver) planClaim(ctx context.Context, dir string, rec driver.RunRecord, slot string, data []byte, rerun bool, keep int) (claimPlan, error) {
	st, err := d.readLedger(ctx, dir, true)
	switch {
	case err != nil:
		return claimPlan{}, err
	case st.highest > rec.Fence:
		return claimPlan{}, refused(rec, st.highest)
	}
	fence := st.fenceOp(dir, rec.Fence, d.acl)
	if !slices.Contains(st.slots, slot) {
		create := &zk.CreateRequest{Path: dir + "/" + slot, Data: data, Acl: d.acl, Flags: zk.FlagPersistent}
		return claimPlan{append([]any{fence, create}, trimOps(dir, st.slots, slot, keep)...), rec, true}, nil
	}
	old, version, err := d.readRun(ctx, dir, slot, rec.Name)
	switch {
	case err != nil:
		return claimPlan{}, err
	case sameRun(old, rec): // this claim, sent again after a lost reply
		return claimPlan{got: rec, claimed: true}, nil
	case rerun && old.Ended.IsZero() && old.Fence < rec.Fence:
		replace := &zk.SetDataRequest{Path: dir + "/" + slot, Data: data, Version: version}
		return claimPlan{append([]any{fence, replace}, trimOps(dir, st.slots, slot, keep)...), rec, true}, nil
	case st.highest == rec.Fence:
		return claimPlan{got: old}, nil // nothing to raise
	}
	return claimPlan{[]any{fence, &zk.CheckVersionRequest{Path: dir + "/" + slot, Version: version}}, old, false}, nil
}

// FinishRun implements driver.Ledger: one multi that raises the fence and
// writes the outcome on the slot's record, at the version read, if that
// record is rec's run (same fence).
func (d *zkDriver) FinishRun(ctx context.Context, rec driver.RunRecord) error {
	slot, data, err := encodeRun(rec)
	if err != nil {
		return err
	}
	dir := d.ledgerDir(rec.Name)
	for range ledgerTries {
		st, err := d.readLedger(ctx, dir, false)
		switch {
		case errors.Is(err, errStale):
			continue
		case err != nil:
			return err
		case !st.exists:
			return noRun(rec)
		case st.highest > rec.Fence:
			return refused(rec, st.highest)
		}
		old, version, err := d.readRun(ctx, dir, slot, rec.Name)
		switch {
		case errors.Is(err, errStale), err == nil && old.Fence != rec.Fence:
			return noRun(rec) // no record of the slot, or another run's
		case err != nil:
			return err
		case sameRun(old, rec): // this outcome, sent again after a lost reply
			return nil
		}
		ops := []any{st.fenceOp(dir, rec.Fence, d.acl), &zk.SetDataRequest{Path: dir + "/" + slot, Data: data, Version: version}}
		if err := d.ledgerMulti(ctx, dir, ops); !retry(err) {
			return err
		}
	}
	return changing(rec.Name)
}

// Runs implements driver.Ledger, after a sync (the session's server may
// lag the leader): the slots' znodes, read concurrently, newest first.
func (d *zkDriver) Runs(ctx context.Context, name string) ([]driver.RunRecord, error) {
	if err := d.sync(ctx); err != nil {
		return nil, err
	}
	dir := d.ledgerDir(name)
	children, err := d.children(ctx, dir)
	if err != nil {
		return nil, err
	}
	var slots []string
	for _, c := range children {
		if isSlotName(c) {
			slots = append(slots, c)
		}
	}
	slices.Sort(slots)
	slices.Reverse(slots)
	return bounded(ctx, func() ([]driver.RunRecord, error) { return d.readRuns(dir, name, slots) })
}

// ledgerState is a name's ledger as read at one version of its znode.
type ledgerState struct {
	exists  bool
	highest uint64   // the highest fence written (0 for a new ledger)
	version int32    // the znode's data version
	slots   []string // its slot children (when asked for)
}

// fenceOp is the first op of every ledger write: the name's znode set to
// fence (not below highest, which the caller checked), at the version
// read, or created with it when the ledger is new.
func (st ledgerState) fenceOp(dir string, fence uint64, acl []zk.ACL) any {
	data := []byte(strconv.FormatUint(fence, 10))
	if !st.exists {
		return &zk.CreateRequest{Path: dir, Data: data, Acl: acl, Flags: zk.FlagPersistent}
	}
	return &zk.SetDataRequest{Path: dir, Data: data, Version: st.version}
}

// trimOps deletes the slots of existing beyond the newest keep of
// existing and slot, never slot itself.
func trimOps(dir string, existing []string, slot string, keep int) []any {
	all := existing
	if !slices.Contains(all, slot) {
		all = append(slices.Clone(existing), slot)
	}
	slices.Sort(all)
	var ops []any
	for _, s := range all[:max(0, len(all)-keep)] {
		if s != slot {
			ops = append(ops, &zk.DeleteRequest{Path: dir + "/" + s, Version: -1})
		}
	}
	return ops
}

// retry reports whether a ledger multi failed only because the ledger
// changed since it was read (another write's version, a slot created or
// trimmed meanwhile, the ledger created by another writer): the write is
// decided again on a fresh read.
func retry(err error) bool {
	return errors.Is(err, errStale) || errors.Is(err, zk.ErrBadVersion) || errors.Is(err, zk.ErrNodeExists) || errors.Is(err, zk.ErrNoNode)
}

func changing(name string) error {
	return fmt.Errorf("zookeeper: run ledger of %q kept changing under %d reads", name, ledgerTries)
}
