package etcdlock

import (
	"context"
	"strconv"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// A held key can move to another driver's lease: Adopt puts it, unchanged,
// under the adopter's own lease, and the granting driver's refresh puts it
// back under its own (takeBack) while it still holds the same token. From
// then on the key lives exactly as long as the lease it is under, and the
// driver that bound it elsewhere must not end it by accident:
//
//   - a renewal's sweep of the keys nobody asked for within a TTL deletes
//     a key only while it is still under that session's lease (sweep);
//   - a release deletes the key while it is under the driver's lease, or,
//     found elsewhere, only if its value bears the token's digest
//     (releaseKeys): the same token's Release frees the lock wherever its
//     key lives, as on every backend;
//   - Close revokes the driver's own leases, which no longer carry the key;
//   - a slot whose key another driver took over is never handed out again
//     while the session in its name lives (handOver): a new claim would
//     otherwise write the adopter's key by name.

// handOver forgets keys, found under a lease the driver does not keep, and
// keeps their slots from being reused.
func (p *pool) handOver(keys ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, k := range keys {
		if s := p.all[slotLease(k)]; s != nil {
			s.handed[k] = true
		}
		p.drop(k)
	}
}

// slotLease is the lease named in key's slot (see pool.register), 0 when
// key does not name one.
func slotLease(key string) clientv3.LeaseID {
	slot := key[strings.LastIndexByte(key, '/')+1:]
	hex, _, ok := strings.Cut(slot, "-")
	id, err := strconv.ParseInt(hex, 16, 64)
	if !ok || err != nil {
		return 0
	}
	return clientv3.LeaseID(id)
}

// sweepOps is how many keys one sweep or release transaction handles:
// each is a nested transaction of three operations, and etcd counts those
// against the outer transaction's --max-txn-ops.
const sweepOps = maxTxnOps / 2

// sweep deletes keys, stale under s: those bound to s alone only while
// they are still under its lease, the others (on their way between two of
// the driver's sessions, never granted) as they are. It forgets them, and
// hands over those found under another lease.
func (p *pool) sweep(ctx context.Context, s *session, keys []string) error {
	p.mu.Lock()
	checked := make([]bool, len(keys))
	for i, k := range keys {
		checked[i] = p.byKey[k] == s && p.moving[k] == nil
	}
	p.mu.Unlock()
	var gone, elsewhere []string
	for lo := 0; lo < len(keys); lo += sweepOps {
		hi := min(len(keys), lo+sweepOps)
		ops := make([]clientv3.Op, 0, hi-lo)
		for i := lo; i < hi; i++ {
			ops = append(ops, deleteUnder(keys[i], s.id, checked[i]))
		}
		resp, err := p.cli.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return err
		}
		for j, r := range resp.Responses {
			if t := r.GetResponseTxn(); t != nil && !t.Succeeded && len(t.Responses[0].GetResponseRange().Kvs) > 0 {
				elsewhere = append(elsewhere, keys[lo+j])
			} else {
				gone = append(gone, keys[lo+j])
			}
		}
	}
	p.forget(gone)
	p.handOver(elsewhere...)
	return nil
}

// deleteUnder deletes key if it is under lease (and otherwise reads it,
// keys only); unchecked, whatever lease it is under.
func deleteUnder(key string, lease clientv3.LeaseID, checked bool) clientv3.Op {
	if !checked {
		return clientv3.OpDelete(key)
	}
	return clientv3.OpTxn(
		[]clientv3.Cmp{clientv3.Compare(clientv3.LeaseValue(key), "=", lease)},
		[]clientv3.Op{clientv3.OpDelete(key)},
		[]clientv3.Op{clientv3.OpGet(key, clientv3.WithKeysOnly())})
}

// leaseOf returns the lease of the session key is bound to (0: none).
func (p *pool) leaseOf(key string) clientv3.LeaseID {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s := p.byKey[key]; s != nil {
		return s.id
	}
	return 0
}

// boundTo reports whether key is bound to the session of lease id (also
// during a move).
func (p *pool) boundTo(key string, id clientv3.LeaseID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	s, to := p.byKey[key], p.moving[key]
	return s != nil && s.id == id || to != nil && to.id == id
}

// adoptKey registers key, another driver's, as claim's, bound to s, asked
// for now. p.mu is held.
func (p *pool) adoptKey(s *session, claim, key string) string {
	if old, ok := p.byToken[claim]; ok && old != key {
		p.drop(old)
	}
	if c, ok := p.claimOf[key]; ok && c != claim {
		delete(p.byToken, c)
	}
	p.byToken[claim], p.claimOf[key] = key, claim
	p.rebound(key, s, false)
	return key
}
