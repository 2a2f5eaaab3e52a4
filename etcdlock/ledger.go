package etcdlock

import (
	"context"
	"fmt"
	"time"

	"github.com/dlockdev/dlock/driver"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The run ledger (driver.Ledger) lives beside the locks, under the same
// prefix, in keys of its own (runsDir): one key per recorded slot of a
// name, PREFIX%runs/NAME/SLOT, holding the record as JSON, and one per
// name, PREFIX%runs/NAME, holding the highest fence a write to the name's
// ledger has carried. Its keys are under no lease: records outlive the
// locks and the Lockers that wrote them, and are as durable as any etcd
// write (committed by a quorum, fsynced). The fence key is never deleted,
// so that a write under an older grant is refused after any trim.
//
// Every write is one transaction that raises the fence key to the write's
// fence and writes the slot's record only if the fence key is at most
// that fence and the slot key is as the write last saw it (fencedWrite):
// a claim of a free slot, the common case, is one round trip. A claim
// that finds the slot taken, a rerun and an outcome take a second, since
// each must first read the record it replaces; so that a record is never
// replaced on an outdated view, the transaction compares the slot key's
// mod revision with the one read. A claim then keeps the newest keep
// slots with one more read of the name's slot keys and, when there are
// more, a delete of the oldest, itself fenced (trim). That read and
// delete are not atomic with the claim, which needs them for nothing:
// they bound the ledger's size.

// ClaimRun implements driver.Ledger.
func (d *etcdDriver) ClaimRun(ctx context.Context, rec driver.RunRecord, rerun bool, keep int) (driver.RunRecord, bool, error) {
	if keep < 1 {
		return driver.RunRecord{}, false, invalidRun("keep %d runs of %q: want 1 or more", keep, rec.Name)
	}
	slot, value, err := encodeRun(rec)
	if err != nil {
		return driver.RunRecord{}, false, err
	}
	claims := func(v slotView) bool {
		return v.rev == 0 || rerun && v.rec.Ended.IsZero() && v.rec.Fence < rec.Fence
	}
	v, err := d.fencedWrite(ctx, rec.Name, rec.Fence, d.keys.runKey(rec.Name, slot), func(v slotView) string {
		if claims(v) {
			return value
		}
		return ""
	})
	switch {
	case err != nil:
		return driver.RunRecord{}, false, err
	case !claims(v):
		return v.rec, false, nil
	}
	d.trim(ctx, rec.Name, rec.Fence, keep)
	return rec, true, nil
}

// FinishRun implements driver.Ledger: the outcome (Ended, Status) goes on
// the slot's record if it is still rec's run (same fence); otherwise only
// the fence is raised, and the answer is driver.ErrNotHeld.
func (d *etcdDriver) FinishRun(ctx context.Context, rec driver.RunRecord) error {
	slot, _, err := encodeRun(rec)
	if err != nil {
		return err
	}
	ours := func(v slotView) bool { return v.rev != 0 && v.rec.Fence == rec.Fence }
	var encodeErr error
	v, err := d.fencedWrite(ctx, rec.Name, rec.Fence, d.keys.runKey(rec.Name, slot), func(v slotView) string {
		if !ours(v) {
			return ""
		}
		done := v.rec
		done.Ended, done.Status = rec.Ended, rec.Status
		_, value, err := encodeRun(done)
		encodeErr = err
		return value
	})
	switch {
	case err != nil:
		return err
	case encodeErr != nil:
		return encodeErr
	case !ours(v):
		return fmt.Errorf("etcd: run ledger of %q has no run of slot %s under fence %d (dropped, or run again): %w",
			rec.Name, rec.Slot.UTC().Format(time.RFC3339Nano), rec.Fence, driver.ErrNotHeld)
	}
	return nil
}

// Runs implements driver.Ledger: one read of the name's records, newest
// slot first (key order is slot order).
func (d *etcdDriver) Runs(ctx context.Context, name string) ([]driver.RunRecord, error) {
	resp, err := d.cli.Get(ctx, d.keys.runDir(name), clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend))
	if err != nil {
		return nil, d.fail(ctx, err)
	}
	runs := make([]driver.RunRecord, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		r, err := decodeRun(name, kv.Key, kv.Value)
		if err != nil {
			return nil, err
		}
		runs = append(runs, r)
	}
	return runs, nil
}

// trim deletes name's records beyond the newest keep slots, in
// transactions that each require the fence key still at most fence: a
// claimant that lost its grant since its claim deletes nothing its
// successor wrote meanwhile. A claim of a slot older than the newest keep
// is recorded and dropped at once. The trim bounds the ledger's size and
// decides nothing: when it fails the claim still stands (failing it would
// leave a claimed slot that nobody runs), and the next claim trims again.
func (d *etcdDriver) trim(ctx context.Context, name string, fence uint64, keep int) {
	resp, err := d.cli.Get(ctx, d.keys.runDir(name), clientv3.WithPrefix(), clientv3.WithKeysOnly(),
		clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
	if err != nil {
		return
	}
	old := resp.Kvs[:max(len(resp.Kvs)-keep, 0)]
	for len(old) > 0 {
		n := min(len(old), maxTxnOps)
		dels := make([]clientv3.Op, n)
		for i, kv := range old[:n] {
			dels[i] = clientv3.OpDelete(string(kv.Key))
		}
		resp, err := d.cli.Txn(ctx).If(fenceAtMost(d.keys.runFence(name), fence, true)).Then(dels...).Commit()
		if err != nil || !resp.Succeeded {
			return
		}
		old = old[n:]
	}
}
