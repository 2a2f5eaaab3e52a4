package etcdlock

import (
	"context"
	"errors"
	"sync"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// releaseKeys deletes keys[i] ("": none) if tokens[i] holds it, and
// reports which it deleted. Each key is deleted in one round trip while
// it is under the lease the driver bound it to; one found under another
// lease (adopted elsewhere, see handover.go) is deleted only if its value
// bears the token's digest and it is unchanged since it was read, and one
// that does not bear it is handed over. A key named twice is deleted once.
func (d *etcdDriver) releaseKeys(ctx context.Context, keys, tokens []string) ([]bool, error) {
	deleted := make([]bool, len(keys))
	found := make([]*mvccpb.KeyValue, len(keys))
	var uniq []int              // indexes of the distinct keys
	firstAt := map[string]int{} // key → its first index
	for i, k := range keys {
		if _, dup := firstAt[k]; k != "" && !dup {
			firstAt[k] = i
			uniq = append(uniq, i)
		}
	}
	errs := make([]error, (len(uniq)+sweepOps-1)/sweepOps)
	var wg sync.WaitGroup
	for c := range errs {
		at := uniq[c*sweepOps : min(len(uniq), (c+1)*sweepOps)]
		wg.Go(func() { errs[c] = d.deleteBound(ctx, keys, at, deleted, found) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for _, i := range uniq {
		if found[i] == nil {
			continue
		}
		ok, err := d.deleteHeld(ctx, keys[i], tokens[i], found[i])
		if err != nil {
			return nil, err
		}
		deleted[i] = ok
	}
	for i, k := range keys { // a key named twice (one claim): as its first
		if k != "" {
			deleted[i] = deleted[firstAt[k]]
		}
	}
	return deleted, nil
}

// deleteBound deletes, in one transaction, each keys[i] for i in at that
// is under the lease the driver bound it to; found[i] is the key as it is
// under another lease (nil: deleted, or gone).
func (d *etcdDriver) deleteBound(ctx context.Context, keys []string, at []int, deleted []bool, found []*mvccpb.KeyValue) error {
	ops := make([]clientv3.Op, len(at))
	for j, i := range at {
		ops[j] = clientv3.OpTxn(
			[]clientv3.Cmp{clientv3.Compare(clientv3.LeaseValue(keys[i]), "=", d.pool.leaseOf(keys[i]))},
			[]clientv3.Op{clientv3.OpDelete(keys[i])},
			[]clientv3.Op{clientv3.OpGet(keys[i])})
	}
	resp, err := d.cli.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return err
	}
	for j, i := range at {
		t := resp.Responses[j].GetResponseTxn()
		if t.Succeeded {
			deleted[i] = t.Responses[0].GetResponseDeleteRange().Deleted > 0
		} else {
			found[i] = first(t.Responses[0].GetResponseRange().Kvs)
		}
	}
	return nil
}

// handOverTries bounds how often a token-checked move or delete of a key
// is tried again when the key changed between the read and the write (two
// drivers holding the same token each putting it under their own lease).
const handOverTries = 3

// errKeyChanging reports a key that changed at every try.
var errKeyChanging = errors.New("etcd: the lock's key changed at every try (another client holding the same token keeps moving it)")

// deleteHeld deletes key, read as kv under a lease the driver did not
// bind it to, if token holds it; a key held by another token is handed
// over and left alone.
func (d *etcdDriver) deleteHeld(ctx context.Context, key, token string, kv *mvccpb.KeyValue) (bool, error) {
	for range handOverTries {
		if kv == nil {
			return false, nil
		}
		if !heldBy(kv.Value, token) {
			d.pool.handOver(key)
			return false, nil
		}
		resp, err := d.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)).
			Then(clientv3.OpDelete(key)).
			Else(clientv3.OpGet(key)).
			Commit()
		if err != nil {
			return false, err
		}
		if resp.Succeeded {
			return true, nil
		}
		kv = first(resp.Responses[0].GetResponseRange().Kvs)
	}
	return false, errKeyChanging
}
