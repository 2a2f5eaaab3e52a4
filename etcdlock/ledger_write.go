package etcdlock

import (
	"context"
	"fmt"

	"github.com/dlockdev/dlock/driver"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// slotView is a name's ledger as one transaction read it: the highest
// fence (hasTop false when no write has set one) and the record of one
// slot at its key's mod revision (rev 0: no record).
type slotView struct {
	top    uint64
	hasTop bool
	rec    driver.RunRecord
	rev    int64
}

// decideFunc chooses a write from a view of the slot: the slot's new
// record, or "" to leave it as it is (the fence is raised either way).
type decideFunc func(v slotView) string

// maxLedgerTries bounds how often one ledger write decides again on a
// newer view. Each retry follows a write by someone else to the same slot
// or fence key, and the fence key's absence can be guessed wrong only
// once, so a few are plenty; running out is an error, never a guess.
const maxLedgerTries = 8

// fencedWrite makes one fenced write to name's ledger at the slot key:
// unless the ledger's highest fence is above fence (then driver.ErrNotHeld,
// nothing written), it raises the highest to fence and writes what decide
// chose, in one transaction that requires what decide saw to be still
// so: the slot key at the revision seen, and the fence key absent, or at
// most fence. When that no longer holds, the same transaction reads the
// fence and slot keys at one revision, and decide chooses again on them.
// The first attempt guesses the common case without reading: the fence
// key present and the slot without a record. It returns the view the
// committed write was decided on.
func (d *etcdDriver) fencedWrite(ctx context.Context, name string, fence uint64, key string, decide decideFunc) (slotView, error) {
	fenceKey := d.keys.runFence(name)
	v := slotView{hasTop: true}
	for range maxLedgerTries {
		if v.top > fence {
			return v, fmt.Errorf("etcd: run ledger of %q: fence %d is below the highest a write has carried, %d (a later grant's): %w",
				name, fence, v.top, driver.ErrNotHeld)
		}
		then := []clientv3.Op{clientv3.OpPut(fenceKey, padFence(fence))}
		if rec := decide(v); rec != "" {
			then = append(then, clientv3.OpPut(key, rec))
		}
		resp, err := d.cli.Txn(ctx).
			If(fenceAtMost(fenceKey, fence, v.hasTop), clientv3.Compare(clientv3.ModRevision(key), "=", v.rev)).
			Then(then...).
			Else(clientv3.OpGet(fenceKey), clientv3.OpGet(key)).
			Commit()
		if err != nil {
			return v, d.fail(ctx, err)
		}
		if resp.Succeeded {
			return v, nil
		}
		if v, err = viewOf(name, resp); err != nil {
			return v, err
		}
	}
	return v, fmt.Errorf("etcd: run ledger of %q changed under %d writes in a row; try again", name, maxLedgerTries)
}

// fenceAtMost compares the fence key with fence: its value at most
// fence's, or, when the ledger has no fence yet, its absence (etcd fails
// every value compare of a missing key, and has no "or"). The values are
// fixed-width decimals, so v <= padFence(fence) is v < padFence(fence)
// followed by a NUL byte, in byte order: etcd compares only with =, !=, <
// and >.
func fenceAtMost(fenceKey string, fence uint64, present bool) clientv3.Cmp {
	if !present {
		return clientv3.Compare(clientv3.CreateRevision(fenceKey), "=", 0)
	}
	return clientv3.Compare(clientv3.Value(fenceKey), "<", padFence(fence)+"\x00")
}

// viewOf reads the fence and slot keys from a write's Else branch.
func viewOf(name string, resp *clientv3.TxnResponse) (slotView, error) {
	var v slotView
	if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
		top, err := parseFence(name, kvs[0].Value)
		if err != nil {
			return v, err
		}
		v.top, v.hasTop = top, true
	}
	if kvs := resp.Responses[1].GetResponseRange().Kvs; len(kvs) > 0 {
		rec, err := decodeRun(name, kvs[0].Key, kvs[0].Value)
		if err != nil {
			return v, err
		}
		v.rec, v.rev = rec, kvs[0].ModRevision
	}
	return v, nil
}
