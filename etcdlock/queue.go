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
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// errQueueEntryLost reports that a waiter's own key vanished while it
// waited (its lease expired, or someone deleted the key).
var errQueueEntryLost = errors.New("etcd: this waiter's queue key vanished (lease expired or key deleted)")

// AcquireWait queues req.Token behind every earlier contender for the name,
// FIFO by create revision, and waits until all of them are gone. Each
// waiter watches only its predecessor, so a release wakes exactly one
// waiter. The waiter's key lives under the driver's wait lease (see
// waitlease.go), which it renews (KeepAliveOnce every third of its TTL)
// while it waits, and moves to the lease of the lock's TTL: a waiter with
// a deadline before it is granted (its claim), one without at the grant's
// first refresh (handedOff). When ctx is done the waiter's key is deleted
// in the background (the call returns at once) and ctx's error is
// returned with the holder etcd last reported, if that report is less
// than a third of a wait lease old. Any other failure, a lost place in the queue included
// (errQueueEntryLost: the portable layer queues again), is returned as an
// error without a holder.
func (d *etcdDriver) AcquireWait(ctx context.Context, req driver.Request) (driver.Grant, error) {
	w, err := d.enqueue(ctx, req)
	if err != nil {
		if cerr := ctxErr(ctx); cerr != nil {
			err = fmt.Errorf("%w (%v)", cerr, err)
		}
		return driver.Grant{}, d.fail(ctx, err)
	}
	if w.pred != nil {
		w.planVerify(ctx)
		d.step("wait")
	}
	for w.pred != nil && err == nil {
		err = w.waitForPredecessor(ctx)
	}
	if err == nil && !w.lapse.IsZero() {
		err = w.claim(ctx)
	}
	if err != nil {
		return w.abandon(ctx, err)
	}
	d.pool.markHeld(w.key)
	if w.short {
		return w.handedOff(), nil
	}
	return granted(w.rev, w.sess.secs, w.since), nil
}

// waiter is one queued AcquireWait.
type waiter struct {
	d    *etcdDriver
	name string
	held string // the key's value once held: owner and token digest (heldValue)
	key  string
	// lapse is when the wait ends, while the key holds a waiting value
	// (see waitMark); zero once claimed, or when it never had one.
	lapse time.Time
	call  string   // the call's claim on name (claimOf its token)
	sess  *session // the session key lives under
	secs  int64    // the lease length of the lock, in seconds
	// short is true while key is on the wait lease, to be moved to the
	// lock's when the waiter is first (promote).
	short bool
	rev   int64            // the create revision of key: our place, and our fence
	pred  *mvccpb.KeyValue // the contender just before us; nil when first
	seen  int64            // a revision at which pred still existed
	// predHolds is true when pred was the holder at seen: its deletion
	// then makes us the holder for sure (see guard).
	predHolds bool
	watched   time.Time        // when the current watch was confirmed created
	renewAt   time.Time        // when the lease is next renewed: a third of its TTL after the last renewal was sent
	since     time.Time        // when the last grant or renewal of the lease was sent
	holder    *mvccpb.KeyValue // the holder etcd last reported
	// verifyAt, with a deadline, is when the waiter reads the queue once
	// more, so that a wait that times out reports a holder etcd confirmed
	// just before (confirmed: when that read answered).
	verifyAt, confirmed time.Time
}

// verifyLead bounds how long before the deadline the final read is made.
const (
	minVerifyLead = 50 * time.Millisecond
	maxVerifyLead = 500 * time.Millisecond
)

// planVerify schedules the final read a fifth of the wait (50 to 500 ms)
// before ctx's deadline, if it has one.
func (w *waiter) planVerify(ctx context.Context) {
	dl, ok := ctx.Deadline()
	if !ok {
		return
	}
	lead := min(max(time.Until(dl)/5, minVerifyLead), maxVerifyLead)
	w.verifyAt = dl.Add(-lead)
}

func (w *waiter) untilVerify() time.Duration {
	if w.verifyAt.IsZero() || !w.confirmed.Before(w.verifyAt) {
		return time.Hour
	}
	return max(time.Until(w.verifyAt), 0)
}

// verify reads the queue linearizably (the final read before the
// deadline); gone is true when the predecessor changed meanwhile.
func (w *waiter) verify(ctx context.Context) (gone bool, err error) {
	prev := w.pred
	if err := w.next(ctx, 0); err != nil {
		return false, err
	}
	w.confirmed = time.Now()
	return w.pred == nil || string(w.pred.Key) != string(prev.Key) || w.pred.CreateRevision != prev.CreateRevision, nil
}

// Watches that etcd 3.4 mistakes for catching-up ones are served by a loop
// that runs every syncInterval; guardEvery is how often the next waiter in
// line looks at its predecessor itself during that window.
const (
	syncInterval = 100 * time.Millisecond
	guardEvery   = 10 * time.Millisecond
	guardBehind  = 25 * time.Millisecond
)

// guardEvery is how often the waiter looks at its predecessor itself while
// its watch may still be a catching-up one: every guardEvery when next in
// line, every guardBehind otherwise (its predecessor may become the holder
// and leave before the watch catches up, but less soon).
func (w *waiter) guardEvery() time.Duration {
	if w.predHolds {
		return guardEvery
	}
	return guardBehind
}

// enqueue puts the waiter's key, under the lock's lease if the name has
// no key at all (the waiter holds it), else under the wait lease, and
// reads the two newest contenders: itself and its predecessor.
func (d *etcdDriver) enqueue(ctx context.Context, req driver.Request) (*waiter, error) {
	secs, err := d.leaseSeconds(req.TTL)
	if err != nil {
		return nil, err
	}
	w := &waiter{d: d, name: req.Name, held: heldValue(req.Owner, req.Token), call: claimOf(req.Name, req.Token), secs: secs}
	resp, err := w.put(ctx, req)
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		d.pool.gone(w.sess) // ended since its last renewal; take a new one, once
		resp, err = w.put(ctx, req)
	}
	if err == nil && !resp.Succeeded && secs != d.waitSecs() && !w.short {
		resp, err = w.join(ctx, w.value(ctx)) // put did not queue the key
	}
	if err != nil {
		switch {
		case w.sess == nil:
		case ctxErr(ctx) != nil:
			d.pool.unsure(w.key) // the put may land after this returns
		default:
			d.pool.deleteLater(w.key) // the put may have landed
		}
		return nil, err
	}
	w.rev, w.seen = resp.Header.Revision, resp.Header.Revision
	if resp.Succeeded && !w.short { // (join's transaction has no condition: it always succeeds)
		w.lapse = time.Time{} // put with its held value
		return w, nil         // nobody else: the waiter holds the lock
	}
	if kvs := resp.Responses[1].GetResponseRange().Kvs; len(kvs) == 2 {
		w.pred = kvs[1]
	}
	w.setHolder(first(resp.Responses[2].GetResponseRange().Kvs))
	return w, nil
}

// put takes the shared lease of the lock's TTL and, in one transaction,
// puts the waiter's key under it if the name has no key (the uncontended
// case: Succeeded, and nothing to read); otherwise the transaction queues
// the key under the wait lease (the same one when the lock's TTL is the
// wait lease's) and reads the two newest contenders (itself and its
// predecessor) and the holder. A wait lease that is not at hand without
// a grant or a renewal is not waited for: the transaction then does
// nothing else (not Succeeded, w.short false), and join queues the key.
func (w *waiter) put(ctx context.Context, req driver.Request) (*clientv3.TxnResponse, error) {
	key, s, since, err := w.d.pool.get(ctx, w.secs, w.call, w.d.keys.dir(req.Name))
	if err != nil {
		return nil, err
	}
	w.key, w.sess = key, s
	w.renewed(since)
	w.d.step("session")
	q, qsince := s, since
	if w.secs != w.d.waitSecs() {
		q, qsince = w.d.pool.ready(key, w.d.waitSecs())
	}
	resp, err := w.putIfFree(ctx, s, q)
	if q == nil || q == s {
		return resp, err
	}
	switch { // the key was bound to both sessions: settle where it went
	case err == nil && resp.Succeeded:
		w.d.pool.settle(key, q, false)
	case err == nil:
		w.d.pool.settle(key, q, true)
		w.sess, w.short = q, true
		w.renewed(qsince)
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		// One of the two leases ended, and nothing was written: a plain
		// attempt tells which (enqueue, join).
		w.d.pool.settle(key, q, false)
		return w.putIfFree(ctx, s, nil)
	}
	return resp, err
}

// putIfFree puts the waiter's key under s, with its held value, if the
// name has no key; otherwise, unless q is nil, it puts the key under q
// with its waiting value and reads the two newest contenders and the
// holder.
func (w *waiter) putIfFree(ctx context.Context, s, q *session) (*clientv3.TxnResponse, error) {
	dir := w.d.keys.dir(w.name)
	var queue []clientv3.Op
	if q != nil {
		queue = []clientv3.Op{
			clientv3.OpPut(w.key, w.value(ctx), clientv3.WithLease(q.id)),
			clientv3.OpGet(dir, newest()...), clientv3.OpGet(dir, clientv3.WithFirstCreate()...),
		}
	}
	return w.d.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(dir), "=", 0).WithPrefix()).
		Then(clientv3.OpPut(w.key, w.held, clientv3.WithLease(s.id))).
		Else(queue...).
		Commit()
}

// value is the waiter's key's value while it waits: its held value, and when
// ctx has a deadline, that deadline as its lapse (see waitMark).
func (w *waiter) value(ctx context.Context) string {
	dl, ok := ctx.Deadline()
	if !ok {
		return w.held
	}
	w.lapse = dl
	return waitValue(w.held, dl)
}

// newest reads the two newest contenders of a directory.
func newest() []clientv3.OpOption {
	return []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend), clientv3.WithLimit(2)}
}

// waitForPredecessor waits until pred is deleted, then finds the next
// predecessor (nil when the waiter is now first).
//
// The watch starts at the server's current revision rather than at
// w.seen+1: etcd 3.4 serves a watch whose start revision it has already
// passed (an "unsynced" watcher) only from a loop that runs every 100 ms,
// which is what stalls concurrency.Mutex at each handoff. A watch from
// "now" is synced at once; the created response says which revision it
// starts after, and if that is past w.seen the predecessor is looked up
// again, since it may have gone in between.
//
// etcd itself picks "now" between two steps, and a write landing between
// them still makes the watch a catching-up one. So the next waiter in line
// (whose predecessor holds the lock) also looks at the predecessor every
// guardEvery during the first syncInterval of its watch: at most a few
// reads per handoff, instead of a 100 ms stall now and then.
func (w *waiter) waitForPredecessor(ctx context.Context) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events := w.d.cli.Watch(wctx, string(w.pred.Key), clientv3.WithCreatedNotify())
	renew := time.NewTimer(time.Until(w.renewAt))
	defer renew.Stop()
	guard := time.NewTimer(time.Hour)
	defer guard.Stop()
	verify := time.NewTimer(w.untilVerify())
	defer verify.Stop()
	for {
		var gone bool
		var err error
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-renew.C:
			err = w.keepAlive(ctx)
			renew.Reset(time.Until(w.renewAt))
		case <-guard.C:
			gone, err = w.recheck(ctx)
		case <-verify.C:
			gone, err = w.verify(ctx)
		case resp, ok := <-events:
			gone, err = w.predecessorGone(ctx, resp, ok)
		}
		if err != nil || gone {
			return err
		}
		if !w.watched.IsZero() && time.Since(w.watched) < syncInterval+guardEvery {
			guard.Reset(w.guardEvery())
		}
	}
}

// predecessorGone interprets one watch response; on a deletion it moves
// w to the next predecessor.
func (w *waiter) predecessorGone(ctx context.Context, resp clientv3.WatchResponse, ok bool) (bool, error) {
	switch {
	case !ok:
		if err := ctx.Err(); err != nil {
			return false, err
		}
		return false, errors.New("etcd: watch closed")
	case resp.Err() != nil:
		return false, resp.Err()
	case resp.Created:
		w.watched = time.Now()
		if resp.Header.Revision <= w.seen {
			return false, nil
		}
		return w.recheck(ctx)
	}
	for _, ev := range resp.Events {
		// A deletion at or before seen is of an older generation of the
		// key (keys are reused, see pool.register), seen from a member
		// whose watch started behind: pred still existed at seen.
		if ev.Type == clientv3.EventTypeDelete && ev.Kv.ModRevision > w.seen {
			return true, w.moveOn(ctx, ev.Kv.ModRevision)
		}
	}
	return false, nil
}

// recheck looks the predecessor up again; if it is gone, w moves on.
func (w *waiter) recheck(ctx context.Context) (bool, error) {
	// A serializable read (no quorum round): the member's state is
	// conclusive only if it includes seen, where pred still existed.
	resp, err := w.d.cli.Get(ctx, string(w.pred.Key), clientv3.WithKeysOnly(), clientv3.WithSerializable())
	if err != nil {
		return false, err
	}
	if resp.Header.Revision < w.seen {
		return false, nil
	}
	if len(resp.Kvs) > 0 && resp.Kvs[0].CreateRevision == w.pred.CreateRevision {
		w.seen = resp.Header.Revision
		return false, nil
	}
	return true, w.moveOn(ctx, 0)
}

// moveOn finds the waiter's place once pred is gone (at: the revision of
// its deletion, 0 if unknown). When pred was the holder, the waiter holds
// the lock now without asking: nothing created before pred remained, pred
// was the newest key before the waiter's, and any key created later comes
// after it. Its own key is known to exist, short of a deletion by hand, as
// long as its lease was renewed less than a third of a TTL ago. This saves
// a round trip per handoff; otherwise the queue is read again.
func (w *waiter) moveOn(ctx context.Context, at int64) error {
	if w.predHolds && time.Now().Before(w.renewAt) {
		w.pred = nil
		return nil
	}
	return w.next(ctx, at)
}

// next reads, in one transaction, the waiter's own key, the newest
// contender created before it, and the holder. at is the revision of the
// deletion that woke the waiter (0: none): the state at that revision is
// then read from the member that reported it, without a quorum round (a
// serializable read); a member that has not applied it yet answers
// ErrFutureRev and the read is made linearizable instead.
func (w *waiter) next(ctx context.Context, at int64) error {
	resp, err := w.read(ctx, at)
	if at > 0 && (errors.Is(err, rpctypes.ErrFutureRev) || errors.Is(err, rpctypes.ErrCompacted)) {
		at = 0
		resp, err = w.read(ctx, at)
	}
	if err != nil {
		return err
	}
	if len(resp.Responses[0].GetResponseRange().Kvs) == 0 {
		return errQueueEntryLost
	}
	w.pred, w.seen = first(resp.Responses[1].GetResponseRange().Kvs), resp.Header.Revision
	if at > 0 {
		w.seen = at // what was read is the state at at, not at the header's revision
	}
	w.setHolder(first(resp.Responses[2].GetResponseRange().Kvs))
	return nil
}

// setHolder records whether the predecessor is the holder.
func (w *waiter) setHolder(holder *mvccpb.KeyValue) {
	w.holder = holder
	w.predHolds = w.pred != nil && holder != nil && string(holder.Key) == string(w.pred.Key)
}

func (w *waiter) read(ctx context.Context, at int64) (*clientv3.TxnResponse, error) {
	own := []clientv3.OpOption{clientv3.WithKeysOnly()}
	before := append(clientv3.WithLastCreate(), clientv3.WithMaxCreateRev(w.rev-1), clientv3.WithKeysOnly())
	holder := clientv3.WithFirstCreate()
	if at > 0 {
		pin := []clientv3.OpOption{clientv3.WithRev(at), clientv3.WithSerializable()}
		own, before, holder = append(own, pin...), append(before, pin...), append(holder, pin...)
	}
	dir := w.d.keys.dir(w.name)
	return w.d.cli.Txn(ctx).Then(
		clientv3.OpGet(w.key, own...),
		clientv3.OpGet(dir, before...),
		clientv3.OpGet(dir, holder...),
	).Commit()
}

// keepAlive renews the waiter's lease once, and with it the waiter's
// claim on its key; if another waiter of the driver renewed it lately (a
// wait lease is shared), the waiter takes that renewal for its own.
func (w *waiter) keepAlive(ctx context.Context) error {
	if since, ok := w.d.pool.renewedLately(w.sess, w.key); ok {
		w.renewed(since)
		return nil
	}
	sent := time.Now()
	err := w.d.pool.renew(ctx, w.sess, []string{w.key})
	if errors.Is(err, errSessionGone) {
		return errQueueEntryLost
	}
	if err == nil {
		w.renewed(sent)
	}
	return err
}

// renewed schedules the next renewal of the waiter's lease after one
// sent at sent.
func (w *waiter) renewed(sent time.Time) {
	w.since = sent
	w.renewAt = sent.Add(w.sess.ttl / 3)
}

// abandon leaves the queue: the waiter's key is deleted in the
// background, so that the call returns by ctx's deadline. When ctx ended
// the wait, the error is ctx's, with the holder only if etcd confirmed it
// lately: at its deadline, by the final read made shortly before it
// (planVerify); when canceled, by renewals all on time (one overdue by
// more than TTL/12 means etcd has stopped answering). Otherwise, and on
// any other failure, no holder is returned: it is not known.
func (w *waiter) abandon(ctx context.Context, err error) (driver.Grant, error) {
	w.d.pool.deleteLater(w.key)
	cerr := ctxErr(ctx)
	if cerr == nil || !isCtxErr(err) && status.Code(err) != codes.DeadlineExceeded && status.Code(err) != codes.Canceled {
		return driver.Grant{}, w.d.fail(ctx, err)
	}
	var g driver.Grant
	fresh := time.Now().Before(w.renewAt.Add(w.sess.ttl / renewAgeDiv))
	if errors.Is(cerr, context.DeadlineExceeded) && !w.verifyAt.IsZero() {
		fresh = !w.confirmed.Before(w.verifyAt)
	}
	if w.holder != nil && fresh {
		g.Holder = driver.Holder{Name: w.name, Owner: ownerOf(w.holder), Fence: uint64(w.holder.CreateRevision), TTL: -1}
	}
	return g, w.d.fail(ctx, cerr)
}

// ctxErr returns ctx's error when ctx is done or its deadline has passed:
// gRPC may fail a call for the deadline a moment before ctx reports it.
func ctxErr(ctx context.Context) error {
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		<-ctx.Done()
	}
	return ctx.Err()
}
