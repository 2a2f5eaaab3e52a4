package pglock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/pglock"
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
	if strings.Fields(n.Payload)[0] != "next" {
		t.Errorf("the waiter that gave up notified %q, want the next waiter", n.Payload)
	}
	var reserved, token *string
	if err := d.admin.QueryRow(ctx(t), `SELECT split_part(reserved, '@', 1), token FROM dlock_leases WHERE name = 'handoff'`).Scan(&reserved, &token); err != nil {
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

// TestPollBehind: a waiter queued behind a lock reserved for another
// waiter (a release handed it over, and that waiter never comes: it died)
// is not notified when the reservation lapses, so it attempts again when
// the reservation ends, not after its usual poll, and is granted. The
// driver tells each of the waiter's sleeps; the one after the attempt
// that found the reservation must end by the reservation's end (before,
// the waiter slept maxPoll, 250 ms, whenever the reserved waiter never
// came), and the next attempt takes the lock.
//
// For the waiter's attempt to meet the reservation (which lasts 50 ms),
// the test holds the row locked until that attempt waits for it, then
// releases the lock to the dead waiter in the same transaction. When the
// attempt still comes too late for the reservation (a stalled machine),
// the test starts over with another name.
func TestPollBehind(t *testing.T) {
	d := newDB(t)
	for try := range 5 {
		name := fmt.Sprintf("behind/%d", try)
		if sleeps, ok := pollBehindOnce(t, d, name); ok {
			t.Logf("the waiter's sleeps: %v", sleeps)
			return
		}
		t.Logf("try %d: the waiter came after the reservation had lapsed; again", try)
	}
	t.Fatal("in 5 tries the waiter never met the reservation")
}

type sleep struct{ reserved, d time.Duration }

func (s sleep) String() string { return fmt.Sprintf("reserved %v, slept %v", s.reserved, s.d) }

// pollBehindOnce runs the scenario on name; ok is false when the
// waiter's attempt never saw the reservation.
func pollBehindOnce(t *testing.T, d *db, name string) (sleeps []sleep, ok bool) {
	drv := d.locker(t, pglock.Config{}).Driver()
	var mu sync.Mutex
	pglock.SetSleepHook(drv, func(reserved, d time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		sleeps = append(sleeps, sleep{reserved, d})
	})
	req := func(tok string) driver.Request {
		return driver.Request{Name: name, Token: tok, Owner: tok, TTL: time.Minute}
	}
	if g, err := drv.TryAcquire(ctx(t), req("holder")); err != nil || !g.Acquired {
		t.Fatalf("holder: %+v %v", g, err)
	}
	d.exec(t, `UPDATE dlock_leases SET waiters = ARRAY['dead'] WHERE name = $1`, name)
	type result struct {
		g   driver.Grant
		err error
	}
	got := make(chan result, 1)
	go func() {
		g, err := drv.(driver.Queuer).AcquireWait(ctx(t), req("waiter"))
		got <- result{g, err}
	}()
	queuedOn(t, d, name, "waiter")

	tx, err := d.admin.Begin(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx(t), `SELECT 1 FROM dlock_leases WHERE name = $1 FOR UPDATE`, name); err != nil {
		t.Fatal(err)
	}
	blockedOnRow(t, d) // the waiter's next attempt (its poll) waits for the row
	// Released to the dead waiter, as a release does (the head of the
	// queue is reserved; nobody is notified here, and the dead waiter
	// would not come anyway).
	if _, err := tx.Exec(ctx(t), `UPDATE dlock_leases SET token = NULL, owner = '', expires_at = clock_timestamp(),
		reserved = 'dead', waiters = ARRAY['waiter', 'dead'] WHERE name = $1`, name); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx(t)); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil || !r.g.Acquired {
		t.Fatalf("the waiter behind the lapsed reservation: %+v, %v; want granted", r.g, r.err)
	}
	mu.Lock()
	defer mu.Unlock()
	last := sleeps[len(sleeps)-1]
	if last.reserved < 0 {
		return sleeps, false
	}
	if last.d > last.reserved+time.Millisecond {
		t.Errorf("the waiter found the lock reserved for %v more and slept %v: want it to try again when the reservation lapses", last.reserved, last.d)
	}
	return sleeps, true
}

// queuedOn waits until tok is in name's queue.
func queuedOn(t *testing.T, d *db, name, tok string) {
	t.Helper()
	for range 400 {
		var in bool
		if err := d.admin.QueryRow(ctx(t), `SELECT `+queuedSQL+` FROM dlock_leases WHERE name = $2`, tok, name).Scan(&in); err == nil && in {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%s never queued on %s", tok, name)
}

// blockedOnRow waits until a statement of the database waits for a row
// lock.
func blockedOnRow(t *testing.T, d *db) {
	t.Helper()
	for range 2000 {
		var n int
		if err := d.admin.QueryRow(ctx(t), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n); err == nil && n > 0 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("no statement ever waited for the locked row")
}
