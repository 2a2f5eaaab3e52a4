package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/dlockdev/dlock/driver"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Refresh checks that token's key still exists and renews the lease it
// lives under once (KeepAliveOnce). The lease keeps its granted TTL, so
// ttl may not exceed it. A key that is gone is never re-created; when its
// shared lease has ended, the error is driver.ErrSessionEnded.
func (d *etcdDriver) Refresh(ctx context.Context, name, token string, ttl time.Duration) error {
	results, err := d.RefreshBatch(ctx, []driver.RefreshItem{{Name: name, Token: token, TTL: ttl}})
	if err != nil {
		return err
	}
	return results[0]
}

// RefreshBatch moves to the lease of its TTL a key that a queue handed
// off on the wait lease (moveHandedOff), reads every item's key (maxTxnOps
// per transaction), puts back under its lease a key that another driver
// adopted (takeBack), then renews each distinct lease of the driver's
// those keys live under once.
// results[i] is nil, a driver.ErrNotHeld variant, or the renewal's error.
func (d *etcdDriver) RefreshBatch(ctx context.Context, items []driver.RefreshItem) ([]error, error) {
	keys := make([]string, len(items))
	for i, it := range items {
		keys[i], _ = d.pool.keyOf(claimOf(it.Name, it.Token)) // "": never held here
	}
	moved := d.moveHandedOff(ctx, items, keys)
	owners := d.pool.touch(keys)
	leases, err := d.leasesOf(ctx, keys)
	if err != nil {
		return nil, d.fail(ctx, err)
	}
	taken := d.takeBackAll(ctx, items, keys, owners, leases)
	for i, err := range moved {
		if err != nil {
			taken[i] = err
		}
	}
	// A key that is gone may have gone with its lease: renewing that lease
	// too tells which (driver.ErrSessionEnded).
	renew := slices.Clone(leases)
	for i, id := range leases {
		if id == 0 {
			renew[i] = owners[i]
		}
	}
	renewed := d.renewAll(ctx, renew)
	d.step("refresh")
	results := make([]error, len(items))
	for i, it := range items {
		if err, ok := taken[i]; ok && err != nil {
			results[i] = err
			continue
		}
		results[i] = d.refreshResult(ctx, it, keys[i], leases[i], renewed[renew[i]])
	}
	return results, nil
}

// refreshResult is one item's outcome: lease is the one its key lives
// under (0: the key is gone), err the outcome of renewing that lease (or,
// for a key that is gone, the lease it lived under).
func (d *etcdDriver) refreshResult(ctx context.Context, it driver.RefreshItem, key string, lease clientv3.LeaseID, err error) error {
	claim := claimOf(it.Name, it.Token)
	if lease == 0 {
		if d.pool.done(claim, key) || errors.Is(err, errSessionGone) {
			return driver.ErrSessionEnded
		}
		return d.notHeld(ctx, it.Name)
	}
	if errors.Is(err, errSessionGone) {
		d.pool.done(claim, key)
		return driver.ErrSessionEnded
	}
	if err != nil {
		return d.fail(ctx, err)
	}
	if s := d.pool.byID(lease); s != nil && it.TTL > s.ttl {
		return fmt.Errorf("etcd lease renewed for its granted %s: it cannot be lengthened to %s", s.ttl, it.TTL)
	}
	return nil
}

// leasesOf reads keys and returns the lease each lives under, 0 for the
// keys that are gone.
func (d *etcdDriver) leasesOf(ctx context.Context, keys []string) ([]clientv3.LeaseID, error) {
	leases := make([]clientv3.LeaseID, len(keys))
	errs := make([]error, (len(keys)+maxTxnOps-1)/maxTxnOps)
	var wg sync.WaitGroup
	for c := range errs {
		lo, hi := c*maxTxnOps, min(len(keys), (c+1)*maxTxnOps)
		wg.Go(func() { errs[c] = d.readLeases(ctx, keys[lo:hi], leases[lo:hi]) })
	}
	wg.Wait()
	return leases, errors.Join(errs...)
}

func (d *etcdDriver) readLeases(ctx context.Context, keys []string, leases []clientv3.LeaseID) error {
	var ops []clientv3.Op
	var at []int // ops[j] reads keys[at[j]]
	for i, k := range keys {
		if k != "" {
			ops, at = append(ops, clientv3.OpGet(k, clientv3.WithKeysOnly())), append(at, i)
		}
	}
	if len(ops) == 0 {
		return nil
	}
	resp, err := d.cli.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return err
	}
	for j, r := range resp.Responses {
		if kv := first(r.GetResponseRange().Kvs); kv != nil {
			leases[at[j]] = clientv3.LeaseID(kv.Lease)
		}
	}
	return nil
}

// renewAll renews each distinct lease in leases once, concurrently.
func (d *etcdDriver) renewAll(ctx context.Context, leases []clientv3.LeaseID) map[clientv3.LeaseID]error {
	out := map[clientv3.LeaseID]error{}
	var ids []clientv3.LeaseID
	for _, id := range leases {
		if _, dup := out[id]; id != 0 && !dup {
			out[id] = nil
			ids = append(ids, id)
		}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Go(func() {
			err := d.renewLease(ctx, id)
			mu.Lock()
			out[id] = err
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

// renewLease renews one lease: through its session when the driver keeps
// it (which also deletes the session's stale keys), else directly.
func (d *etcdDriver) renewLease(ctx context.Context, id clientv3.LeaseID) error {
	if s := d.pool.byID(id); s != nil {
		return d.pool.renew(ctx, s, nil)
	}
	ka, err := d.cli.KeepAliveOnce(ctx, id)
	if err == nil && ka.TTL <= 0 || isLeaseNotFound(err) {
		return errSessionGone
	}
	return err
}

// Release deletes token's key if token still holds it, which wakes the
// next waiter (it watches this key): in one transaction while the key is
// under the lease the driver bound it to (the key's slot belongs to this
// token until now, see pool.register), else only if its value bears the
// token's digest (another driver adopted it: see handover.go). The shared
// lease stays for other keys. If the delete fails, the key is deleted at
// the lease's next renewal, or ends with the lease.
func (d *etcdDriver) Release(ctx context.Context, name, token string) error {
	key, ok := d.pool.keyOf(claimOf(name, token))
	if !ok {
		return d.notHeld(ctx, name)
	}
	deleted, err := d.releaseKeys(ctx, []string{key}, []string{token})
	if err != nil {
		d.pool.abandon(key)
		return d.fail(ctx, err)
	}
	ended := d.pool.done(claimOf(name, token), key)
	switch {
	case deleted[0]:
		return nil
	case ended:
		return driver.ErrSessionEnded
	}
	return d.notHeld(ctx, name)
}

// ReleaseBatch deletes every item's key as Release does, sweepOps per
// transaction, the transactions concurrently. results[i] is nil when
// items[i]'s key was deleted, else a driver.ErrNotHeld variant.
func (d *etcdDriver) ReleaseBatch(ctx context.Context, items []driver.ReleaseItem) ([]error, error) {
	keys, tokens := make([]string, len(items)), make([]string, len(items))
	for i, it := range items {
		keys[i], _ = d.pool.keyOf(claimOf(it.Name, it.Token)) // "": never held here
		tokens[i] = it.Token
	}
	deleted, err := d.releaseKeys(ctx, keys, tokens)
	if err != nil {
		for _, k := range keys {
			d.pool.abandon(k)
		}
		return nil, d.fail(ctx, err)
	}
	results := make([]error, len(items))
	for i, k := range keys {
		ended := d.pool.done(claimOf(items[i].Name, items[i].Token), k)
		switch {
		case deleted[i]:
		case ended:
			results[i] = driver.ErrSessionEnded
		default:
			results[i] = driver.ErrNotHeld
		}
	}
	return results, nil
}

// notHeld says why a token has no key: ErrTakenOver when someone else
// holds the name now, ErrExpired when nobody does, plain ErrNotHeld when
// that lookup fails (the token's key is known to be gone either way).
func (d *etcdDriver) notHeld(ctx context.Context, name string) error {
	resp, err := d.cli.Get(ctx, d.keys.dir(name), clientv3.WithPrefix(), clientv3.WithCountOnly())
	switch {
	case err != nil:
		return driver.ErrNotHeld
	case resp.Count > 0:
		return driver.ErrTakenOver
	}
	return driver.ErrExpired
}
