package etcdlock

import (
	"context"
	"errors"

	"github.com/dlockdev/dlock/driver"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

var _ driver.Adopter = (*etcdDriver)(nil)

// Adopt takes over the key that req.Token holds, granted by another
// driver (or this one): the name's holder, whose value bears the token's
// digest (see tokenMark), is put, unchanged, under this driver's shared
// lease of req.TTL, in one transaction that requires the key unchanged
// since it was read. A Put keeps a key's create revision, so the grant
// keeps its fence, and its place at the head of the name's queue; the
// granting driver's lease no longer carries it, so that lease ending (its
// driver closed, or its process gone) leaves the key alone, and this
// driver never keeps that lease, nor its other keys, alive. Its TTL counts
// from that lease's last renewal, as a grant's does.
//
// A name with no key is driver.ErrExpired; a holder whose value bears
// another token's digest, or none (a key written by an earlier version of
// this driver), driver.ErrTakenOver. A holder of the token whose create
// revision is not fence is left alone and returned as it is, for
// Locker.Resume to refuse the handle's fence.
func (d *etcdDriver) Adopt(ctx context.Context, req driver.Request, fence uint64) (driver.Grant, error) {
	secs, err := d.leaseSeconds(req.TTL)
	if err != nil {
		return driver.Grant{}, err
	}
	for range handOverTries {
		resp, err := d.cli.Get(ctx, d.keys.dir(req.Name), clientv3.WithFirstCreate()...)
		if err != nil {
			return driver.Grant{}, d.fail(ctx, err)
		}
		head := first(resp.Kvs)
		switch {
		case head == nil:
			return driver.Grant{}, driver.ErrExpired
		case !heldBy(head.Value, req.Token):
			return driver.Grant{}, driver.ErrTakenOver
		case uint64(head.CreateRevision) != fence:
			return driver.Grant{Acquired: true, Fence: uint64(head.CreateRevision)}, nil
		}
		g, err := d.adoptHead(ctx, req, secs, head)
		if !errors.Is(err, errKeyChanged) {
			return g, err
		}
	}
	return driver.Grant{}, errKeyChanging
}

// errKeyChanged is a key that changed since it was read.
var errKeyChanged = errors.New("etcd: the key changed since it was read")

// adoptHead puts head, held by req.Token, under this driver's lease of
// secs, unless it changed since it was read (errKeyChanged).
func (d *etcdDriver) adoptHead(ctx context.Context, req driver.Request, secs int64, head *mvccpb.KeyValue) (driver.Grant, error) {
	claim, key := claimOf(req.Name, req.Token), string(head.Key)
	_, s, since, err := d.pool.take(ctx, secs, binding{claim: claim, key: key})
	if err != nil {
		return driver.Grant{}, d.fail(ctx, err)
	}
	resp, err := d.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", head.ModRevision)).
		Then(clientv3.OpPut(key, string(head.Value), clientv3.WithLease(s.id))).
		Commit()
	switch {
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		// The shared lease ended since it was last renewed; nothing was
		// written. Take a new one.
		d.pool.gone(s)
		d.pool.done(claim, key)
		return driver.Grant{}, errKeyChanged
	case err != nil:
		// The put may have landed: the key stays bound here, and is swept
		// at a renewal a TTL from now if it is not asked for again.
		return driver.Grant{}, d.fail(ctx, err)
	case !resp.Succeeded:
		d.pool.done(claim, key)
		return driver.Grant{}, errKeyChanged
	}
	d.pool.markHeld(key)
	return granted(head.CreateRevision, s.secs, since), nil
}
