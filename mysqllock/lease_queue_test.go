package mysqllock_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/mysqllock"
	"github.com/go-sql-driver/mysql"
)

// batchingLocker is a lease-mode Locker on a pool of its own that
// batches statements (as dlock.Open makes it), whose round trips rt
// counts (when not nil).
func batchingLocker(t *testing.T, d *db, rt *atomic.Int64, opts ...dlock.Option) *dlock.Locker {
	t.Helper()
	cfg, err := mysql.ParseDSN(d.srv.DSN(d.name))
	if err != nil {
		t.Fatal(err)
	}
	cfg.InterpolateParams, cfg.MultiStatements = true, true
	if rt != nil {
		cfg.Net = countingNet(rt)
	}
	l, err := mysqllock.New(openSQL(t, cfg.FormatDSN()), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// queuedWait waits for name on l in the background, once the holder
// holds it, and returns the lease once holder has released it: the
// waiter is queued in the server when the holder releases.
func queuedWait(t *testing.T, d *db, l *dlock.Locker, holder *dlock.Lease, opts ...dlock.Option) *dlock.Lease {
	t.Helper()
	got := make(chan *dlock.Lease, 1)
	go func() {
		lease, err := l.Acquire(ctx(t), holder.Name(), append([]dlock.Option{dlock.WithWait(time.Minute)}, opts...)...)
		if err != nil {
			t.Error(err)
		}
		got <- lease
	}()
	d.waitForGetLockWaiter(t)
	if err := holder.Release(ctx(t)); err != nil {
		t.Fatal(err)
	}
	lease := <-got
	if lease == nil {
		t.FailNow()
	}
	return lease
}

// TestLeaseQueuedGrantIsOneMessage: in lease mode on MariaDB, a waiter
// that queued for the wake key is granted by the server as soon as the
// holder's release hands it the key, in the message it queued with: the
// hand-off costs the waiter no message of its own. A wait on a name the
// Locker's waits found held a moment before sends that one message only
// (no first attempt, which the holder would refuse).
func TestLeaseQueuedGrantIsOneMessage(t *testing.T) {
	d := newDB(t)
	const name = "queued/one-message"
	var rt atomic.Int64
	waiter := batchingLocker(t, d, &rt)
	holders := d.locker(t, mysqllock.Config{})
	hold := func() *dlock.Lease {
		lease, err := holders.TryAcquire(ctx(t), name, dlock.WithTTL(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		return lease
	}
	// The pool's connections, and what the driver learns of the server.
	warm, err := waiter.Acquire(ctx(t), name, dlock.WithWait(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if err := warm.Release(ctx(t)); err != nil {
		t.Fatal(err)
	}

	rt.Store(0)
	lease := queuedWait(t, d, waiter, hold())
	if n := rt.Load(); n != 2 {
		t.Errorf("a first wait that queued: %d round trips from its start to its grant, want 2 (an attempt, then the queued grant)", n)
	}
	if err := lease.Release(ctx(t)); err != nil {
		t.Fatal(err)
	}

	rt.Store(0)
	lease = queuedWait(t, d, waiter, hold())
	if n := rt.Load(); n != 1 {
		t.Errorf("a wait on a name just found held: %d round trips from its start to its grant, want 1 (the queued grant)", n)
	}
	if err := lease.Release(ctx(t)); err != nil {
		t.Fatal(err)
	}
}

// TestLeaseQueuedGrantCountsFromTheGrant: a lease granted to a waiter
// that queued for longer than its TTL counts from the grant, not from the
// start of the wait: it has not expired when it is granted.
func TestLeaseQueuedGrantCountsFromTheGrant(t *testing.T) {
	d := newDB(t)
	const name, ttl = "queued/counts-from-grant", 2 * time.Second
	holder, err := d.locker(t, mysqllock.Config{}).TryAcquire(ctx(t), name, dlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	waiter := batchingLocker(t, d, nil)
	got := make(chan *dlock.Lease, 1)
	go func() {
		lease, err := waiter.Acquire(ctx(t), name, dlock.WithTTL(ttl), dlock.WithWait(time.Minute))
		if err != nil {
			t.Error(err)
		}
		got <- lease
	}()
	d.waitForGetLockWaiter(t)
	time.Sleep(ttl + ttl/2) // the wait outlasts the waiter's TTL
	if err := holder.Release(ctx(t)); err != nil {
		t.Fatal(err)
	}
	lease := <-got
	if lease == nil {
		t.FailNow()
	}
	defer func() { _ = lease.Release(ctx(t)) }()
	if left := time.Until(lease.Expires()); left <= 0 {
		t.Errorf("a lease granted after a wait of %s expired %s before it was granted: it counts from before the grant", ttl+ttl/2, -left)
	}
	select {
	case <-lease.Done():
		t.Errorf("a lease granted after a wait of %s has ended: %v", ttl+ttl/2, lease.Err())
	default:
	}
}

// TestLeaseQueuedWaitNamesTheHolder: a wait that runs out on a name the
// Locker's waits found held a moment before (it queues at once, with no
// first attempt) still names the holder, as any wait the backend
// answered does: a conflict, not an outage.
func TestLeaseQueuedWaitNamesTheHolder(t *testing.T) {
	d := newDB(t)
	const name = "queued/names-holder"
	holder, err := d.locker(t, mysqllock.Config{}, dlock.WithOwner("the-holder")).TryAcquire(ctx(t), name, dlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Release(ctx(t)) }()
	waiter := batchingLocker(t, d, nil)
	for i := range 3 {
		_, err := waiter.Acquire(ctx(t), name, dlock.WithWait(time.Second))
		var held *dlock.HeldError
		if !errors.As(err, &held) || held.Holder.Owner != "the-holder" {
			t.Fatalf("wait %d: %v, want a HeldError naming the-holder", i+1, err)
		}
		if errors.Is(err, dlock.ErrBackend) {
			t.Fatalf("wait %d: %v reads as an outage", i+1, err)
		}
	}
}
