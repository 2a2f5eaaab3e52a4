package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlockdev/dlock/driver"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Refresh checks that token's key still exists and renews its lease once
// (KeepAliveOnce): the lease keeps its granted TTL, so ttl may not exceed
// it. The portable layer's watchdog calls Refresh; no clientv3 keepalive
// goroutine runs. A key that is gone is never re-created.
func (d *etcdDriver) Refresh(ctx context.Context, name, token string, ttl time.Duration) error {
	resp, err := d.cli.Get(ctx, d.keys.key(name, token))
	if err != nil {
		return err
	}
	kv := first(resp.Kvs)
	if kv == nil {
		return d.notHeld(ctx, name)
	}
	ka, err := d.cli.KeepAliveOnce(ctx, clientv3.LeaseID(kv.Lease))
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return driver.ErrExpired
	}
	if err != nil {
		return err
	}
	if granted := time.Duration(ka.TTL) * time.Second; ttl > granted {
		return fmt.Errorf("etcd lease renewed for its granted %s: it cannot be lengthened to %s", granted, ttl)
	}
	return nil
}

// Release deletes token's key, if it still exists, and revokes its lease,
// which wakes the next waiter (it watches this key).
func (d *etcdDriver) Release(ctx context.Context, name, token string) error {
	key := d.keys.key(name, token)
	resp, err := d.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), ">", 0)).
		Then(clientv3.OpDelete(key, clientv3.WithPrevKV())).
		Commit()
	if err != nil {
		return err
	}
	if !resp.Succeeded {
		return d.notHeld(ctx, name)
	}
	if prev := resp.Responses[0].GetResponseDeleteRange().PrevKvs; len(prev) > 0 {
		d.revoke(ctx, clientv3.LeaseID(prev[0].Lease))
	}
	return nil
}

// notHeld says why a token has no key: ErrTakenOver when someone else
// holds the name now, else ErrExpired.
func (d *etcdDriver) notHeld(ctx context.Context, name string) error {
	resp, err := d.cli.Get(ctx, d.keys.dir(name), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err == nil && resp.Count > 0 {
		return driver.ErrTakenOver
	}
	return driver.ErrExpired
}
