package etcdlock

import (
	"context"
	"errors"

	"github.com/dlockdev/dlock/driver"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// takeBackAll puts each item's key that a refresh found under a lease the
// driver did not bind it to (leases[i], not owners[i]: another driver
// adopted it) back under owners[i], the driver's, if the item's token
// still holds it: the same token is then held in two places, as on every
// backend (a lease handed on without Detach), and each refresh keeps the
// key under the refreshing driver's own lease, so that it never rides on
// a lease of a driver that may be gone, nor keeps that lease's other keys
// alive. leases[i] becomes owners[i] for the keys put back. The result
// maps each such item to nil (put back) or its error.
func (d *etcdDriver) takeBackAll(ctx context.Context, items []driver.RefreshItem, keys []string, owners, leases []clientv3.LeaseID) map[int]error {
	out := map[int]error{}
	for i, id := range leases {
		if id == 0 || owners[i] == 0 || id == owners[i] || d.pool.boundTo(keys[i], id) {
			continue
		}
		err := d.takeBack(ctx, keys[i], items[i].Token, owners[i])
		switch {
		case err == nil:
			leases[i] = owners[i]
		case errors.Is(err, errSessionGone):
			d.pool.done(claimOf(items[i].Name, items[i].Token), keys[i])
			err = driver.ErrSessionEnded
		case !errors.Is(err, driver.ErrNotHeld):
			err = d.fail(ctx, err)
		}
		out[i] = err
	}
	return out
}

// takeBack puts key back under lease, unchanged, if token holds it; a key
// held by another token, or without a token digest, is handed over.
func (d *etcdDriver) takeBack(ctx context.Context, key, token string, lease clientv3.LeaseID) error {
	resp, err := d.cli.Get(ctx, key)
	if err != nil {
		return err
	}
	kv := first(resp.Kvs)
	for range handOverTries {
		switch {
		case kv == nil:
			d.pool.forget([]string{key})
			return driver.ErrExpired
		case clientv3.LeaseID(kv.Lease) == lease:
			return nil
		case !heldBy(kv.Value, token):
			d.pool.handOver(key)
			return driver.ErrTakenOver
		}
		txn, err := d.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)).
			Then(clientv3.OpPut(key, string(kv.Value), clientv3.WithLease(lease))).
			Else(clientv3.OpGet(key)).
			Commit()
		switch {
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			return errSessionGone
		case err != nil:
			return err
		case txn.Succeeded:
			return nil
		}
		kv = first(txn.Responses[0].GetResponseRange().Kvs)
	}
	return errKeyChanging
}
