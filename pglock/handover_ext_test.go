package pglock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlockdev/dlock/driver"
)

// TestHandOffToNextWhenReservedGivesUp: a release hands the lock to the
// head of the queue (reserved for it, notified); when that waiter gives
// up instead of taking it (its wait ended as it was notified: the
// portable layer then releases its token), its Release hands the lock on
// to the next waiter, reserved for it and notified, as a release does.
// Before, the lock stayed reserved for the waiter that gave up, nobody
// was notified, and the waiters queued behind it slept their poll (250
// ms): the contended benchmark's p99 wait of 250 ms, whenever a round
// ended with the head of the queue giving up.
func TestHandOffToNextWhenReservedGivesUp(t *testing.T) {
	d, drv, q, spy, req := handOffSetUp(t)
	// "gone" queues first: a waiter that will give up when notified.
	d.exec(t, `UPDATE dlock_leases SET waiters = ARRAY['gone'] WHERE name = 'handoff'`)
	type result struct {
		g   driver.Grant
		err error
	}
	got := make(chan result, 1)
	go func() {
		g, err := q.AcquireWait(ctx(t), req("next"))
		got <- result{g, err}
	}()
	waitQueued(t, d, "next")
	if err := drv.Release(ctx(t), "handoff", "holder"); err != nil {
		t.Fatal(err)
	}
	if n := nextNotification(t, spy); n != "gone" {
		t.Fatalf("the release notified %q, want the head of the queue, gone", n)
	}
	// gone gives up: the portable layer releases its token.
	if err := drv.Release(ctx(t), "handoff", "gone"); err != nil && !errors.Is(err, driver.ErrNotHeld) {
		t.Fatalf("release of the token that gave up: %v", err)
	}
	wc, cancel := context.WithTimeout(ctx(t), 5*time.Second)
	defer cancel()
	n, err := spy.WaitForNotification(wc)
	if err != nil {
		t.Fatalf("the waiter that gave up handed the lock to nobody (no notification: %v)", err)
	}
	if n.Payload != "next" {
		t.Errorf("the waiter that gave up notified %q, want the next waiter", n.Payload)
	}
	var reserved, token *string
	if err := d.admin.QueryRow(ctx(t), `SELECT reserved, token FROM dlock_leases WHERE name = 'handoff'`).Scan(&reserved, &token); err != nil {
		t.Fatal(err)
	}
	if (reserved == nil || *reserved != "next") && (token == nil || *token != "next") {
		t.Errorf("row reserved for %v, held by %v: want it reserved for (or taken by) the next waiter", deref(reserved), deref(token))
	}
	r := <-got
	if r.err != nil || !r.g.Acquired {
		t.Fatalf("next waiter: %+v, %v", r.g, r.err)
	}
}

func deref(s *string) string {
	if s == nil {
		return "NULL"
	}
	return *s
}
