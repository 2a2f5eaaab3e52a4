package redlock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/internal/rediscore"
	"github.com/redis/go-redis/v9"
)

// The run ledger (driver.Ledger) over the nodes: every node keeps a copy
// of a name's ledger in the single-node driver's layout and scripts
// (internal/rediscore), at dlock:redlock:{name}:runs and :runs:slots,
// each write fenced on each node. A write succeeds when a majority of the
// nodes took it; a read merges the answers of a majority (mergeRuns). The
// portable layer writes only while it holds the name's lock under the
// quorum fence, so writers of one name are excluded from each other, and
// a stale one (a lower fence) is refused wherever its successor wrote.

var _ driver.Ledger = (*redlock)(nil)

// errLedgerUnfenced: without quorum fences the nodes could not refuse a
// stale holder's writes, nor tell a crashed run from a running one.
var errLedgerUnfenced = fmt.Errorf("redlock: the run ledger needs quorum fencing, which Config.NoFencing (URL fencing=false) turns off: %w", dlock.ErrUnsupported)

// ClaimRun implements driver.Ledger in two steps. It reads the slot on
// every node and merges a majority's answers (mergeSlot); a write under a
// fence below one a node has seen is refused with driver.ErrNotHeld. If
// the merged record stays the slot's (as the single-node script decides),
// it is returned with nothing written; otherwise rec is written to every
// node, replacing there any record without an outcome and with a lower
// fence (a leftover the merge did not count, or the crashed run a rerun
// replaces), and the claim stands once a majority of the nodes took it.
func (d *redlock) ClaimRun(ctx context.Context, rec driver.RunRecord, rerun bool, keep int) (driver.RunRecord, bool, error) {
	if !d.cfg.fencing {
		return driver.RunRecord{}, false, errLedgerUnfenced
	}
	w, err := rediscore.ClaimWrite(layout, rec, true, keep)
	if err != nil {
		return driver.RunRecord{}, false, err
	}
	cur, found, err := d.slotRun(ctx, rec)
	if err != nil {
		return driver.RunRecord{}, false, err
	}
	if found && (!rerun || !cur.Ended.IsZero() || cur.Fence >= rec.Fence) {
		return cur, false, nil
	}
	if err := d.claimAll(ctx, w); err != nil {
		return driver.RunRecord{}, false, err
	}
	return rec, true, nil
}

// slotRead is one node's answer about a slot: the highest fence its
// ledger has seen, and the slot's record if it has one.
type slotRead struct {
	fence uint64
	rec   driver.RunRecord
	found bool
}

// slotRun reads rec's slot on every node and returns the record a
// majority's answers give it (mergeSlot). It fails when fewer than a
// majority answered, and with driver.ErrNotHeld when a node's ledger has
// seen a fence above rec's.
func (d *redlock) slotRun(ctx context.Context, rec driver.RunRecord) (driver.RunRecord, bool, error) {
	field, err := rediscore.RunField(rec.Slot)
	if err != nil {
		return driver.RunRecord{}, false, err
	}
	rs := each(ctx, d, d.cfg.nodeTimeout, 2*d.cfg.nodeTimeout, func(ctx context.Context, i int) (slotRead, error) {
		return readSlot(ctx, d.nodes[i].client, rec.Name, field)
	})
	if err := ctx.Err(); err != nil {
		return driver.RunRecord{}, false, err
	}
	errs := failures(rs)
	if ok, few := d.tooFew(errs); few {
		return driver.RunRecord{}, false, fmt.Errorf("redlock: claim of a run of %q: %d of %d nodes read, %d needed: %w",
			rec.Name, ok, len(d.nodes), d.quorum, joinNodes(errs))
	}
	var copies []driver.RunRecord
	for _, r := range rs {
		switch {
		case r.err != nil:
		case r.val.fence > rec.Fence:
			return driver.RunRecord{}, false, fmt.Errorf("redlock: %w", rediscore.Refused(rec))
		case r.val.found:
			copies = append(copies, r.val.rec)
		}
	}
	cur, ok := mergeSlot(copies, len(errs), d.quorum)
	return cur, ok, nil
}

// readSlot reads, on one node, the highest fence of name's ledger and the
// record of the slot field.
func readSlot(ctx context.Context, c redis.UniversalClient, name, field string) (slotRead, error) {
	vals, err := c.HMGet(ctx, layout.Runs(name), rediscore.RunsFence, field).Result()
	if err != nil {
		return slotRead{}, err
	}
	var out slotRead
	if s, ok := vals[0].(string); ok {
		if out.fence, err = strconv.ParseUint(s, 10, 64); err != nil {
			return slotRead{}, fmt.Errorf("run ledger of %q: fence %.32q is not a number", name, s)
		}
	}
	if s, ok := vals[1].(string); ok {
		out.rec, err = rediscore.DecodeRun(name, s)
		out.found = err == nil
	}
	return out, err
}

// claimAll writes the claim w to every node and succeeds when a majority
// took it.
func (d *redlock) claimAll(ctx context.Context, w rediscore.RunWrite) error {
	rs := each(ctx, d, d.cfg.nodeTimeout, 2*d.cfg.nodeTimeout, func(ctx context.Context, i int) (int64, error) {
		code, _, err := w.Claim(ctx, d.nodes[i].client)
		return code, err
	})
	if err := ctx.Err(); err != nil {
		return err
	}
	written, kept := 0, 0
	for _, r := range rs {
		switch {
		case r.err != nil:
		case r.val == rediscore.RunRefused:
			return fmt.Errorf("redlock: %w", rediscore.Refused(w.Rec))
		case r.val == rediscore.RunWritten:
			written++
		default:
			kept++
		}
	}
	if written >= d.quorum {
		return nil
	}
	return d.short("claim of a run of "+strconv.Quote(w.Rec.Name)+" written to", written, kept,
		"kept another record of the slot", failures(rs))
}

// FinishRun implements driver.Ledger: it records rec's outcome on every
// node whose record of the slot is rec's run (same fence), and succeeds
// when a majority did. A node that has seen a higher fence refuses it
// (driver.ErrNotHeld); so does a majority that has no record of rec's run.
func (d *redlock) FinishRun(ctx context.Context, rec driver.RunRecord) error {
	if !d.cfg.fencing {
		return errLedgerUnfenced
	}
	w, err := rediscore.FinishWrite(layout, rec)
	if err != nil {
		return err
	}
	rs := each(ctx, d, d.cfg.nodeTimeout, 2*d.cfg.nodeTimeout, func(ctx context.Context, i int) (int64, error) {
		return w.Finish(ctx, d.nodes[i].client)
	})
	if err := ctx.Err(); err != nil {
		return err
	}
	written, missing := 0, 0
	for _, r := range rs {
		switch {
		case r.err != nil:
		case r.val == rediscore.RunRefused:
			return fmt.Errorf("redlock: %w", rediscore.Refused(rec))
		case r.val == rediscore.RunWritten:
			written++
		default:
			missing++
		}
	}
	switch {
	case written >= d.quorum:
		return nil
	case missing >= d.quorum:
		return fmt.Errorf("redlock: run ledger of %q: %d of %d nodes have no run of slot %s under fence %d (dropped, or run again): %w",
			rec.Name, missing, len(d.nodes), rec.Slot.UTC().Format(time.RFC3339Nano), rec.Fence, driver.ErrNotHeld)
	}
	return d.short("outcome of a run of "+strconv.Quote(rec.Name)+" recorded on", written, missing,
		"have no record of that run", failures(rs))
}

// Runs implements driver.Ledger: it reads name's ledger on every node and
// returns, newest slot first, what the answers of a majority of them give
// (mergeRuns). It fails when fewer than a majority answered.
func (d *redlock) Runs(ctx context.Context, name string) ([]driver.RunRecord, error) {
	if !d.cfg.fencing {
		return nil, errLedgerUnfenced
	}
	rs := each(ctx, d, d.cfg.nodeTimeout, 2*d.cfg.nodeTimeout, func(ctx context.Context, i int) ([]driver.RunRecord, error) {
		return rediscore.ReadRuns(ctx, d.nodes[i].client, layout, name)
	})
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	errs := failures(rs)
	if ok, few := d.tooFew(errs); few {
		return nil, fmt.Errorf("redlock: runs of %q: %d of %d nodes read, %d needed: %w", name, ok, len(d.nodes), d.quorum, joinNodes(errs))
	}
	var answers [][]driver.RunRecord
	for _, r := range rs {
		if r.err == nil {
			answers = append(answers, r.val)
		}
	}
	return mergeRuns(answers, len(errs), d.quorum), nil
}

// short is the error of a ledger write that fewer than a majority of the
// nodes took: "OP n of N nodes, Q needed (m OTHERS): node errors".
func (d *redlock) short(op string, done, others int, what string, errs []error) error {
	var b strings.Builder
	fmt.Fprintf(&b, "redlock: %s %d of %d nodes, %d needed", op, done, len(d.nodes), d.quorum)
	if others > 0 {
		fmt.Fprintf(&b, " (%d %s)", others, what)
	}
	if err := joinNodes(errs); err != nil {
		return fmt.Errorf("%s: %w", b.String(), err)
	}
	return errors.New(b.String())
}
