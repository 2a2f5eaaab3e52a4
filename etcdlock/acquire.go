package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlockdev/dlock/driver"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TryAcquire makes one attempt: in one transaction, it puts the token's key
// under the driver's shared lease for the TTL only if the name has no key
// at all (no holder, no waiter); otherwise it reads the queue's head. A
// key left by an earlier attempt of the same token whose reply was lost is
// recognised as a grant. Keys at the head of waiters whose wait is over
// (see waitMark) are swept and the attempt made again, up to maxSweeps
// times. Acquired is false only when etcd answered that another key holds
// the name; every failure is an error.
func (d *etcdDriver) TryAcquire(ctx context.Context, req driver.Request) (driver.Grant, error) {
	secs, err := d.leaseSeconds(req.TTL)
	if err != nil {
		return driver.Grant{}, err
	}
	a := &attempt{req: req, secs: secs, claim: claimOf(req.Name, req.Token), dir: d.keys.dir(req.Name)}
	if err := d.seat(ctx, a); err != nil {
		return driver.Grant{}, d.fail(ctx, err)
	}
	d.step("session")
	for sweeps := 0; ; sweeps++ {
		resp, err := d.putIfFree(ctx, req, a.key, a.s.id)
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			// The shared lease ended since it was last renewed: every key
			// under it is gone. Take a new one, once.
			d.pool.gone(a.s)
			if err := d.seat(ctx, a); err != nil {
				return driver.Grant{}, d.fail(ctx, err)
			}
			resp, err = d.putIfFree(ctx, req, a.key, a.s.id)
		}
		switch {
		case err != nil && ctxErr(ctx) != nil:
			d.pool.unsure(a.key) // given up: the put may land after this returns
			return driver.Grant{}, d.fail(ctx, err)
		case err != nil:
			return driver.Grant{}, d.fail(ctx, err) // the key stays registered: a retry recognises it
		case resp.Succeeded:
			d.pool.markHeld(a.key)
			return granted(resp.Header.Revision, a.s.secs, a.since), nil
		}
		d.step("put")
		g, again, err := d.contended(ctx, a, resp.Responses[0].GetResponseRange().Kvs, sweeps < maxSweeps)
		if !again {
			return g, err
		}
		d.step("sweep")
	}
}

// attempt is one TryAcquire call: its request, lease length and claim,
// and the key it puts, under session s, whose TTL counts from since.
type attempt struct {
	req        driver.Request
	secs       int64
	claim, dir string
	key        string
	s          *session
	since      time.Time
}

// seat takes a's key under a shared lease of a.secs.
func (d *etcdDriver) seat(ctx context.Context, a *attempt) error {
	var err error
	a.key, a.s, a.since, err = d.pool.get(ctx, a.secs, a.claim, a.dir)
	return err
}

// contended answers an attempt whose put found the name taken; queue is
// the head of the name's keys. The token's own key at the head is a grant
// an earlier attempt made. With sweep, lapsed waiters' keys at the head
// are swept, and again asks for another attempt when that changed the
// queue; otherwise the head holds the name.
func (d *etcdDriver) contended(ctx context.Context, a *attempt, queue []*mvccpb.KeyValue, sweep bool) (g driver.Grant, again bool, err error) {
	head := first(queue)
	if head == nil {
		d.pool.done(a.claim, a.key)
		return driver.Grant{}, false, errors.New("etcd: the name had a contender but none was read in the same transaction")
	}
	if string(head.Key) == a.key {
		g, err := d.recognised(ctx, a.key, head)
		return g, false, err
	}
	if sweep {
		tried, err := d.sweepHead(ctx, queue)
		if err != nil {
			return driver.Grant{}, false, d.fail(ctx, err)
		}
		if tried { // swept, or the queue changed meanwhile: look again
			return driver.Grant{}, true, nil
		}
	}
	d.pool.done(a.claim, a.key)
	return driver.Grant{Holder: d.holder(ctx, a.req.Name, head)}, false, nil
}

// maxSweeps bounds how often one TryAcquire sweeps lapsed waiters' keys
// and tries again; sweepRead is how many keys of the queue each attempt
// reads for that.
const (
	maxSweeps = 4
	sweepRead = 16
)

// recognised is the grant of a key an earlier attempt of the same token
// created: its TTL counts from its own lease's last renewal. A waiting key
// is claimed first.
func (d *etcdDriver) recognised(ctx context.Context, key string, kv *mvccpb.KeyValue) (driver.Grant, error) {
	s := d.pool.sessionOf(key)
	if s == nil || s.id != clientv3.LeaseID(kv.Lease) {
		return driver.Grant{}, fmt.Errorf("etcd: this token's key %q is under lease %x, which this driver does not keep", key, kv.Lease)
	}
	if held, lapse := heldOf(kv.Value); !lapse.IsZero() {
		if err := d.claimKey(ctx, key, kv.ModRevision, held, s.id); err != nil {
			return driver.Grant{}, d.fail(ctx, err)
		}
	}
	d.pool.markHeld(key)
	return granted(kv.CreateRevision, s.secs, d.pool.sinceOf(s)), nil
}

// putIfFree puts the token's key under lease if the name has no key at
// all; otherwise it reads the queue's first sweepRead keys.
func (d *etcdDriver) putIfFree(ctx context.Context, req driver.Request, key string, lease clientv3.LeaseID) (*clientv3.TxnResponse, error) {
	dir := d.keys.dir(req.Name)
	return d.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(dir), "=", 0).WithPrefix()).
		Then(clientv3.OpPut(key, heldValue(req.Owner, req.Token), clientv3.WithLease(lease))).
		Else(clientv3.OpGet(dir, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend), clientv3.WithLimit(sweepRead))).
		Commit()
}

// claimOf identifies one Acquire call's claim on name (its token).
func claimOf(name, token string) string { return name + "\x00" + token }

// granted is the Grant of a key created at rev under a lease of secs whose
// TTL started counting at since.
func granted(rev, secs int64, since time.Time) driver.Grant {
	return driver.Grant{Acquired: true, Fence: uint64(rev), TTL: time.Duration(secs) * time.Second, Since: since}
}

// holder describes the contender kv, which etcd reported; the TTL left is
// its lease's, in whole seconds, or -1 when that lookup fails (the holder
// itself is known).
func (d *etcdDriver) holder(ctx context.Context, name string, kv *mvccpb.KeyValue) driver.Holder {
	h := driver.Holder{Name: name, TTL: -1, Owner: ownerOf(kv), Fence: uint64(kv.CreateRevision)}
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
