package pglock_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/pglock"
)

// TestReleaseGrantsTheHead: a release grants the lock to the head of the
// queue in its own statement. As the release returns, the row is already
// the waiter's (its token and owner, a new fence, held for the one
// second of a provisional grant), and the waiter's grant says so: the
// fence of the row, a Window of one second, and a Since no later than
// the release. Before, the release only reserved the row and the woken
// waiter took it with a statement of its own: a third statement in series
// in every hand-off.
func TestReleaseGrantsTheHead(t *testing.T) {
	d, drv, q, _, req := handOffSetUp(t)
	var holderFence int64
	if err := d.admin.QueryRow(ctx(t), `SELECT fence FROM dlock_leases WHERE name = 'handoff'`).Scan(&holderFence); err != nil {
		t.Fatal(err)
	}
	type result struct {
		g   driver.Grant
		err error
	}
	got := make(chan result, 1)
	go func() {
		g, err := q.AcquireWait(ctx(t), req("w1"))
		got <- result{g, err}
	}()
	waitQueued(t, d, "w1")
	if err := drv.Release(ctx(t), "handoff", "holder"); err != nil {
		t.Fatal(err)
	}
	released := time.Now()
	var (
		token, owner *string
		fence        int64
		left         time.Duration
	)
	if err := d.admin.QueryRow(ctx(t), `SELECT token, owner, fence,
		(extract(epoch FROM expires_at - clock_timestamp()) * 1e6)::bigint * interval '1 microsecond'
		FROM dlock_leases WHERE name = 'handoff'`).Scan(&token, &owner, &fence, &left); err != nil {
		t.Fatal(err)
	}
	if deref(token) != "w1" || deref(owner) != "w1" {
		t.Fatalf("as the release returned, the row was held by token %s, owner %s: want the head of the queue, w1", deref(token), deref(owner))
	}
	if fence <= holderFence {
		t.Errorf("the hand-off's fence %d, want above the holder's %d", fence, holderFence)
	}
	if left > time.Second {
		t.Errorf("the hand-off holds the row for %v more, want at most the 1 s of a provisional grant", left)
	}
	r := <-got
	if r.err != nil || !r.g.Acquired {
		t.Fatalf("w1: %+v, %v", r.g, r.err)
	}
	if r.g.Fence != uint64(fence) {
		t.Errorf("w1's grant has fence %d, the row %d", r.g.Fence, fence)
	}
	if r.g.Window == 0 {
		// The waiter's poll (every 250 ms) came before the notification,
		// on a loaded machine: its attempt found the lock its own and took
		// it for its TTL, as it should.
		t.Logf("w1 took the lock by its own attempt before the notification came")
		return
	}
	if r.g.Window != time.Second {
		t.Errorf("w1's grant has Window %v, want 1s (provisional)", r.g.Window)
	}
	if r.g.Since.IsZero() || r.g.Since.After(released) {
		t.Errorf("w1's grant counts from %v, after the release returned (%v)", r.g.Since, released)
	}
}

// TestHandOffToADeadHead: the head of the queue died while it queued (its
// Locker is gone: nobody hears its channel). The release grants it the
// lock all the same, for the one second of a provisional grant, and the
// waiter behind it takes the lock once that has run out: the dead waiter
// costs a second, not its TTL (a minute here), and nobody takes the lock
// while the hand-off holds it.
func TestHandOffToADeadHead(t *testing.T) {
	d, drv, q, _, req := handOffSetUp(t)
	d.exec(t, `UPDATE dlock_leases SET waiters = ARRAY['dead@dlock_wake_0000000000000000@@ghost'] WHERE name = 'handoff'`)
	type result struct {
		g   driver.Grant
		err error
	}
	got := make(chan result, 1)
	go func() {
		g, err := q.AcquireWait(ctx(t), req("w"))
		got <- result{g, err}
	}()
	waitQueued(t, d, "w")
	if err := drv.Release(ctx(t), "handoff", "holder"); err != nil {
		t.Fatal(err)
	}
	released := time.Now()
	var token, owner *string
	if err := d.admin.QueryRow(ctx(t), `SELECT token, owner FROM dlock_leases WHERE name = 'handoff'`).Scan(&token, &owner); err != nil {
		t.Fatal(err)
	}
	if deref(token) != "dead" || deref(owner) != "ghost" {
		t.Fatalf("the release handed the lock to token %s, owner %s: want the dead head, owner ghost", deref(token), deref(owner))
	}
	select {
	case r := <-got:
		waited := time.Since(released)
		if r.err != nil || !r.g.Acquired {
			t.Fatalf("the waiter behind the dead head: %+v, %v", r.g, r.err)
		}
		if waited < 900*time.Millisecond {
			t.Errorf("the waiter took the lock %v after the hand-off to the dead head, within its 1 s", waited)
		}
		t.Logf("the waiter behind the dead head was granted %v after the release", waited)
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter behind the dead head was not granted within 10 s of the release")
	}
}

// TestHandOffNotToAWaiterThatGaveUp: a waiter's queue entry carries the
// database time its wait ends. A release does not grant the lock to a
// head whose wait has ended (it gave up, and its leaving the queue has
// not reached the database yet): the lock is only reserved for it, and a
// TryAcquire right after the release takes it. Granting it instead would
// keep the lock from everyone until that waiter's clean-up ran (the
// cancellation storm's "free at once" failed so).
func TestHandOffNotToAWaiterThatGaveUp(t *testing.T) {
	d, drv, _, _, req := handOffSetUp(t)
	d.exec(t, `UPDATE dlock_leases SET waiters = ARRAY['gone@dlock_wake_0000000000000000@1@ghost'] WHERE name = 'handoff'`)
	pglock.SawContended(drv, "handoff") // the release hands over, to a waiter still waiting
	if err := drv.Release(ctx(t), "handoff", "holder"); err != nil {
		t.Fatal(err)
	}
	var token *string
	if err := d.admin.QueryRow(ctx(t), `SELECT token FROM dlock_leases WHERE name = 'handoff'`).Scan(&token); err != nil {
		t.Fatal(err)
	}
	if token != nil {
		t.Fatalf("the release handed the lock to %s, a waiter whose wait had ended", *token)
	}
	if g, err := drv.TryAcquire(ctx(t), req("next")); err != nil || !g.Acquired {
		t.Fatalf("TryAcquire right after the release: %+v, %v", g, err)
	}
}

// TestReleaseHandsOverOnceContended: a Locker that never waited for a
// name releases it with the plain statement, which reserves the lock for
// the head of the queue and wakes it: the waiter takes it with a
// statement of its own, a grant for its whole TTL. Having seen waiters,
// the Locker's next release of the name hands the lock over: as that
// release returns, the row is already the waiter's. A release with nobody
// waiting is the cheapest statement: deciding a hand-off costs it about a
// tenth more.
func TestReleaseHandsOverOnceContended(t *testing.T) {
	d := newDB(t)
	holder, waiter := d.locker(t, pglock.Config{}).Driver(), d.locker(t, pglock.Config{}).Driver()
	req := func(tok string) driver.Request {
		return driver.Request{Name: "handoff", Token: tok, Owner: tok, TTL: time.Minute}
	}
	for round := range 2 {
		tok := fmt.Sprintf("holder-%d", round)
		if g, err := holder.TryAcquire(ctx(t), req(tok)); err != nil || !g.Acquired {
			t.Fatalf("round %d, holder: %+v %v", round, g, err)
		}
		wtok := fmt.Sprintf("waiter-%d", round)
		type result struct {
			g   driver.Grant
			err error
		}
		got := make(chan result, 1)
		go func() {
			g, err := waiter.(driver.Queuer).AcquireWait(ctx(t), req(wtok))
			got <- result{g, err}
		}()
		waitQueued(t, d, wtok)
		if err := holder.Release(ctx(t), "handoff", tok); err != nil {
			t.Fatal(err)
		}
		var token *string
		if err := d.admin.QueryRow(ctx(t), `SELECT token FROM dlock_leases WHERE name = 'handoff'`).Scan(&token); err != nil {
			t.Fatal(err)
		}
		r := <-got
		if r.err != nil || !r.g.Acquired {
			t.Fatalf("round %d, waiter: %+v, %v", round, r.g, r.err)
		}
		switch {
		case round == 0 && r.g.Window != 0:
			t.Errorf("the first release handed the lock over (the waiter's grant has Window %v): want it reserved, the waiter's own attempt taking it", r.g.Window)
		case round == 1 && deref(token) != wtok:
			t.Errorf("as the second release returned, the row was held by %s: want it handed to %s", deref(token), wtok)
		}
		if err := waiter.Release(ctx(t), "handoff", wtok); err != nil {
			t.Fatal(err)
		}
	}
}
