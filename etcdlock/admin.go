package etcdlock

import (
	"context"

	"github.com/dlockdev/dlock/driver"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// List returns the holder of every name starting with prefix: per name,
// the contender with the smallest create revision.
func (d *etcdDriver) List(ctx context.Context, prefix string) ([]driver.Holder, error) {
	resp, err := d.cli.Get(ctx, d.keys.namePrefix(prefix), clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var hs []driver.Holder
	for _, kv := range resp.Kvs {
		name, ok := d.keys.name(kv.Key)
		if !ok || seen[name] {
			continue
		}
		seen[name] = true
		hs = append(hs, d.holder(ctx, name, kv))
	}
	return hs, nil
}

// Inspect returns the holder of name, if any.
func (d *etcdDriver) Inspect(ctx context.Context, name string) (driver.Holder, bool, error) {
	resp, err := d.cli.Get(ctx, d.keys.dir(name), clientv3.WithFirstCreate()...)
	if err != nil {
		return driver.Holder{}, false, err
	}
	head := first(resp.Kvs)
	if head == nil {
		return driver.Holder{Name: name, TTL: -1}, false, nil
	}
	return d.holder(ctx, name, head), true, nil
}

// ForceRelease deletes the holder's key (not its lease, which other locks
// of the holder's driver may share) and, in the same transaction, puts the
// name's eviction record, which WatchEvictions pushes to the evicted
// holder's Locker. The transaction runs only if the key is still the grant
// that was read (same create revision): keys are reused from one grant to
// the next, so a holder that left meanwhile, or a new grant of the same
// key, is left alone and ok is false. No separate counter is needed: the
// next grant's fence is its key's create revision, which is greater than
// the revision of this delete, returned as the new fence. When the name is
// free the current revision is returned.
func (d *etcdDriver) ForceRelease(ctx context.Context, name string) (driver.Holder, bool, uint64, error) {
	resp, err := d.cli.Get(ctx, d.keys.dir(name), clientv3.WithFirstCreate()...)
	if err != nil {
		return driver.Holder{}, false, 0, err
	}
	head := first(resp.Kvs)
	if head == nil {
		return driver.Holder{Name: name, TTL: -1}, false, uint64(resp.Header.Revision), nil
	}
	h := d.holder(ctx, name, head)
	record, err := d.cli.Grant(ctx, evictionRecordSecs)
	if err != nil {
		return driver.Holder{}, false, 0, err
	}
	key := string(head.Key)
	txn, err := d.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", head.CreateRevision)).
		Then(clientv3.OpDelete(key),
			clientv3.OpPut(d.keys.evictionKey(name), evictionRecord(name, h.Fence), clientv3.WithLease(record.ID))).
		Commit()
	if err != nil {
		return driver.Holder{}, false, 0, err
	}
	if !txn.Succeeded {
		// The holder left meanwhile: nobody was evicted. The unused lease
		// would expire anyway; revoking it is a courtesy.
		_, _ = d.cli.Revoke(ctx, record.ID)
		return h, false, uint64(txn.Header.Revision), nil
	}
	return h, true, uint64(txn.Header.Revision), nil
}
