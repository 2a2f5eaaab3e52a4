package etcdlock

import (
	"context"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A waiter that queues behind others with a deadline puts its key with a
// waiting value, which says when its wait ends: waitMark, the deadline in
// Unix milliseconds, a space, the value it takes once held (heldValue).
// Anyone who finds such a key at the head of the queue after that time
// may delete it (sweep), so that a waiter that gave up leaves no key
// holding the lock while its own clean-up (a delete sent in the
// background when it returned) is still on its way. A key becomes the
// holder's only by a claim: when the waiter finds itself first, it
// rewrites its value to its held value in a transaction that requires the
// key unchanged since it was put. A sweep requires the same, so exactly
// one of the two wins: a swept waiter's claim fails (errQueueEntryLost)
// and it never holds the lock, and a claimed key is never swept. Clocks
// only decide when a sweep is tried, never who holds the lock: a sweeper
// whose clock runs ahead can take a waiter's place in the queue a little
// before its deadline, not the lock from a holder.
//
// Keys with a held value — the holder's, a waiter's without a deadline,
// and every key written before this scheme — are never swept, and a
// waiter without a deadline becomes the holder without a claim, as
// before.
const waitMark = "\x00wait "

// waitValue is the value of a waiting key whose wait ends at lapse; held
// is the value it takes when claimed (see heldValue).
func waitValue(held string, lapse time.Time) string {
	return waitMark + strconv.FormatInt(lapse.UnixMilli(), 10) + " " + held
}

// parseValue returns the owner in a key's value and, for an unclaimed
// waiter's key, when its wait ends (zero otherwise). Owners contain no
// control characters (dlock.WithOwner refuses them), so a plain owner
// never starts with waitMark; a malformed waiting value reads as a plain
// owner, never swept. The token digest (see tokenMark) is not part of
// the owner.
func parseValue(v []byte) (owner string, lapse time.Time) {
	held, lapse := heldOf(v)
	owner, _ = splitDigest([]byte(held))
	return owner, lapse
}

// heldOf returns the value a key has once held: v itself, or, for an
// unclaimed waiter's key, v without its waiting prefix; and when that
// waiter's wait ends (zero otherwise).
func heldOf(v []byte) (held string, lapse time.Time) {
	rest, ok := strings.CutPrefix(string(v), waitMark)
	if !ok {
		return string(v), time.Time{}
	}
	ms, held, ok := strings.Cut(rest, " ")
	n, err := strconv.ParseInt(ms, 10, 64)
	if !ok || err != nil {
		return string(v), time.Time{}
	}
	return held, time.UnixMilli(n)
}

// ownerOf is the owner in kv's value.
func ownerOf(kv *mvccpb.KeyValue) string {
	owner, _ := parseValue(kv.Value)
	return owner
}

// lapsed reports whether kv is an unclaimed waiter's key whose wait ended
// before now.
func lapsed(kv *mvccpb.KeyValue, now time.Time) bool {
	_, lapse := parseValue(kv.Value)
	return !lapse.IsZero() && now.After(lapse)
}

// claim makes the waiter's key the holder's, unless someone swept it: on
// the wait lease, by moving it to the lock's (promote); else where it is.
func (w *waiter) claim(ctx context.Context) error {
	var err error
	if w.short {
		err = w.promote(ctx)
	} else {
		err = w.d.claimKey(ctx, w.key, w.rev, w.held, w.sess.id)
	}
	if err != nil {
		return err
	}
	w.lapse = time.Time{}
	w.d.step("claim")
	return nil
}

// claimKey rewrites key, last written at modRev, to its held value (see
// heldValue) under lease, unless it changed since (swept): then
// errQueueEntryLost.
func (d *etcdDriver) claimKey(ctx context.Context, key string, modRev int64, held string, lease clientv3.LeaseID) error {
	resp, err := d.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", modRev)).
		Then(clientv3.OpPut(key, held, clientv3.WithLease(lease))).
		Commit()
	if err != nil {
		return err
	}
	if !resp.Succeeded {
		return errQueueEntryLost
	}
	return nil
}

// sweepHead deletes the leading keys of kvs (a queue, oldest first) that
// are lapsed waiters' keys, all of them only if each is unchanged since it
// was read. It reports whether it found any: then either they are gone or
// the queue changed meanwhile (a clean-up landed, a waiter claimed), and
// the caller reads it again.
func (d *etcdDriver) sweepHead(ctx context.Context, kvs []*mvccpb.KeyValue) (tried bool, err error) {
	now := time.Now()
	var cmps []clientv3.Cmp
	var dels []clientv3.Op
	for _, kv := range kvs {
		if !lapsed(kv, now) || len(dels) == maxTxnOps/2 {
			break
		}
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(string(kv.Key)), "=", kv.ModRevision))
		dels = append(dels, clientv3.OpDelete(string(kv.Key)))
	}
	if len(dels) == 0 {
		return false, nil
	}
	if _, err := d.cli.Txn(ctx).If(cmps...).Then(dels...).Commit(); err != nil {
		return false, err
	}
	return true, nil
}
