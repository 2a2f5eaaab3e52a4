package etcdlock

import (
	"context"
	"time"

	"github.com/dlockdev/dlock/driver"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TryAcquire makes one attempt: it grants a lease and, in one transaction,
// puts the token's key under it only if the name has no key at all (no
// holder, no waiter). Otherwise it revokes the unused lease and returns
// the holder. A key left by an earlier attempt of the same token whose
// reply was lost is recognised as a grant.
func (d *etcdDriver) TryAcquire(ctx context.Context, req driver.Request) (driver.Grant, error) {
	secs, err := leaseSeconds(req.TTL)
	if err != nil {
		return driver.Grant{}, err
	}
	lease, err := d.cli.Grant(ctx, secs)
	if err != nil {
		return driver.Grant{}, err
	}
	resp, err := d.putIfFree(ctx, req, lease.ID)
	if err != nil || !resp.Succeeded {
		d.revoke(ctx, lease.ID)
	}
	switch {
	case err != nil:
		return driver.Grant{}, err
	case resp.Succeeded:
		return granted(resp.Header.Revision, lease.TTL), nil
	}
	head := first(resp.Responses[0].GetResponseRange().Kvs)
	if head != nil && string(head.Key) == d.keys.key(req.Name, req.Token) {
		return granted(head.CreateRevision, secs), nil
	}
	return driver.Grant{Holder: d.holder(ctx, req.Name, head)}, nil
}

// putIfFree puts the token's key under lease if the name has no key at
// all; otherwise it reads the holder.
func (d *etcdDriver) putIfFree(ctx context.Context, req driver.Request, lease clientv3.LeaseID) (*clientv3.TxnResponse, error) {
	dir := d.keys.dir(req.Name)
	return d.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(dir), "=", 0).WithPrefix()).
		Then(clientv3.OpPut(d.keys.key(req.Name, req.Token), req.Owner, clientv3.WithLease(lease))).
		Else(clientv3.OpGet(dir, clientv3.WithFirstCreate()...)).
		Commit()
}

// granted is the Grant of a key created at rev under a lease of secs.
func granted(rev, secs int64) driver.Grant {
	return driver.Grant{Acquired: true, Fence: uint64(rev), TTL: time.Duration(secs) * time.Second}
}

// revoke revokes an unused lease, best effort: if it fails the lease
// expires by itself, and any key under it with it.
func (d *etcdDriver) revoke(ctx context.Context, id clientv3.LeaseID) {
	ctx, cancel := detached(ctx)
	defer cancel()
	_, _ = d.cli.Revoke(ctx, id)
}

// holder describes the contender kv (nil: nobody); the TTL left is the
// lease's, in whole seconds, or -1 when unknown.
func (d *etcdDriver) holder(ctx context.Context, name string, kv *mvccpb.KeyValue) driver.Holder {
	h := driver.Holder{Name: name, TTL: -1}
	if kv == nil {
		return h
	}
	h.Owner, h.Fence = string(kv.Value), uint64(kv.CreateRevision)
	ttl, err := d.cli.TimeToLive(ctx, clientv3.LeaseID(kv.Lease))
	if err == nil && ttl.TTL >= 0 {
		h.TTL = time.Duration(ttl.TTL) * time.Second
	}
	return h
}

func first(kvs []*mvccpb.KeyValue) *mvccpb.KeyValue {
	if len(kvs) == 0 {
		return nil
	}
	return kvs[0]
}
