package pglock_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/pglock"
	"github.com/jackc/pgx/v5"
)

// handOffSetUp gives a lease-mode driver on a fresh database whose name
// "handoff" is held by the token "holder", the driver's Queuer, a
// connection of the test's own that LISTENs on the driver's wake channel
// and the table's (it sees every notification), and req, which makes a
// request on "handoff" for a token.
func handOffSetUp(t *testing.T) (*db, driver.Driver, driver.Queuer, *pgx.Conn, func(tok string) driver.Request) {
	t.Helper()
	d := newDB(t)
	drv := d.locker(t, pglock.Config{}).Driver()
	spy, err := pgx.Connect(ctx(t), d.url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = spy.Close(context.Background()) })
	for _, ch := range []string{"dlock_leases", pglock.WakeChannel(drv)} {
		if _, err := spy.Exec(ctx(t), "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			t.Fatal(err)
		}
	}
	req := func(tok string) driver.Request {
		return driver.Request{Name: "handoff", Token: tok, Owner: tok, TTL: time.Minute}
	}
	if g, err := drv.TryAcquire(ctx(t), req("holder")); err != nil || !g.Acquired {
		t.Fatalf("holder: %+v %v", g, err)
	}
	return d, drv, drv.(driver.Queuer), spy, req
}

// TestHandOff checks lease mode's queue: waiters queue in arrival order,
// each release notifies the head of the queue alone (by its token, on its
// driver's wake channel), and the woken waiter takes the lock. A listening
// connection of the test's own sees every notification.
func TestHandOff(t *testing.T) {
	d, drv, q, spy, req := handOffSetUp(t)
	type result struct {
		tok string
		g   driver.Grant
		err error
	}
	got := make(chan result, 2)
	for _, tok := range []string{"w1", "w2"} {
		go func() {
			g, err := q.AcquireWait(ctx(t), req(tok))
			got <- result{tok, g, err}
		}()
		waitQueued(t, d, tok)
	}
	prev := "holder"
	for _, want := range []string{"w1", "w2"} {
		if err := drv.Release(ctx(t), "handoff", prev); err != nil {
			t.Fatalf("release by %s: %v", prev, err)
		}
		n := nextNotification(t, spy)
		if n != want {
			t.Errorf("release by %s notified %q, want the head of the queue %q", prev, n, want)
		}
		r := <-got
		if r.err != nil || !r.g.Acquired || r.tok != want {
			t.Fatalf("after the release by %s: %s got %+v, %v; want %s granted", prev, r.tok, r.g, r.err, want)
		}
		prev = want
	}
	if err := drv.Release(ctx(t), "handoff", prev); err != nil {
		t.Fatal(err)
	}
	c, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if n, err := spy.WaitForNotification(c); err == nil {
		t.Errorf("release with nobody queued notified %q", n.Payload)
	}
}

// waitQueued waits until tok is in the handoff row's queue.
func waitQueued(t *testing.T, d *db, tok string) {
	t.Helper()
	for range 200 {
		var in bool
		if err := d.admin.QueryRow(ctx(t), `SELECT `+queuedSQL+` FROM dlock_leases WHERE name = 'handoff'`, tok).Scan(&in); err == nil && in {
			return
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatalf("%s never queued", tok)
}

// queuedSQL is whether the token $1 is in a row's queue of waiters (as
// "TOKEN@CHANNEL", or a bare token).
const queuedSQL = `EXISTS (SELECT 1 FROM unnest(waiters) w WHERE split_part(w, '@', 1) = $1)`

// nextNotification returns the token the next notification is for (a
// payload starts with it: a wake-up is the token alone, a hand-off "TOKEN
// p FENCE MICROS").
func nextNotification(t *testing.T, c *pgx.Conn) string {
	t.Helper()
	wc, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := c.WaitForNotification(wc)
	if err != nil {
		t.Fatalf("no notification: %v", err)
	}
	return strings.Fields(n.Payload)[0]
}

// TestHandOffListenerDown: with the listening connection killed, a
// waiter still gets the lock after a release, by polling.
func TestHandOffListenerDown(t *testing.T) {
	d := newDB(t)
	drv := d.locker(t, pglock.Config{}).Driver()
	q := drv.(driver.Queuer)
	if g, err := drv.TryAcquire(ctx(t), driver.Request{Name: "handoff", Token: "holder", TTL: time.Minute}); err != nil || !g.Acquired {
		t.Fatalf("holder: %+v %v", g, err)
	}
	got := make(chan error, 1)
	go func() {
		g, err := q.AcquireWait(ctx(t), driver.Request{Name: "handoff", Token: "w", TTL: time.Minute})
		if err == nil && !g.Acquired {
			err = fmt.Errorf("not granted: %+v", g)
		}
		got <- err
	}()
	waitQueued(t, d, "w")
	killListener(t, d)
	if err := drv.Release(ctx(t), "handoff", "holder"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("waiter not granted 10s after the release with its listener down")
	}
}

// killListener terminates every backend that is LISTENing and waits until
// they are gone.
func killListener(t *testing.T, d *db) {
	t.Helper()
	n := d.exec(t, `SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity
		WHERE datname = current_database() AND query LIKE 'LISTEN %' AND pid <> pg_backend_pid()`)
	if n == 0 {
		t.Fatal("no LISTENing backend to kill")
	}
	time.Sleep(500 * time.Millisecond) // let the listener see its connection die
}

// TestHandOffWakesOnlyTheHeadsLocker: each Locker listens on a wake
// channel of its own, and a release notifies the head of the queue on its
// Locker's channel alone. Two Lockers each queue a waiter; a connection
// of the test's own LISTENs on both wake channels and the table's, and
// must see each release once, on the channel of the Locker whose waiter
// is next. With one channel for the table, every Locker's listening
// connection received, parsed and discarded every release.
func TestHandOffWakesOnlyTheHeadsLocker(t *testing.T) {
	d := newDB(t)
	a, b := d.locker(t, pglock.Config{}).Driver(), d.locker(t, pglock.Config{}).Driver()
	spy, err := pgx.Connect(ctx(t), d.url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = spy.Close(context.Background()) })
	for _, ch := range []string{"dlock_leases", pglock.WakeChannel(a), pglock.WakeChannel(b)} {
		if _, err := spy.Exec(ctx(t), "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			t.Fatal(err)
		}
	}
	req := func(tok string) driver.Request {
		return driver.Request{Name: "handoff", Token: tok, Owner: tok, TTL: time.Minute}
	}
	if g, err := a.TryAcquire(ctx(t), req("holder")); err != nil || !g.Acquired {
		t.Fatalf("holder: %+v %v", g, err)
	}
	got := make(chan string, 2)
	for _, w := range []struct {
		drv driver.Driver
		tok string
	}{{a, "wa"}, {b, "wb"}} {
		go func() {
			g, err := w.drv.(driver.Queuer).AcquireWait(ctx(t), req(w.tok))
			if err != nil || !g.Acquired {
				t.Errorf("%s: %+v, %v", w.tok, g, err)
			}
			got <- w.tok
		}()
		waitQueued(t, d, w.tok)
	}
	prev := "holder"
	for _, next := range []struct {
		drv driver.Driver
		tok string
	}{{a, "wa"}, {b, "wb"}} {
		if err := a.Release(ctx(t), "handoff", prev); err != nil {
			t.Fatalf("release by %s: %v", prev, err)
		}
		wc, cancel := context.WithTimeout(ctx(t), 10*time.Second)
		n, err := spy.WaitForNotification(wc)
		cancel()
		if err != nil {
			t.Fatalf("release by %s: no notification: %v", prev, err)
		}
		if want := pglock.WakeChannel(next.drv); n.Channel != want || strings.Fields(n.Payload)[0] != next.tok {
			t.Errorf("release by %s notified %q on %q, want %q on its Locker's channel %q", prev, n.Payload, n.Channel, next.tok, want)
		}
		if tok := <-got; tok != next.tok {
			t.Fatalf("after the release by %s, %s was granted, want %s", prev, tok, next.tok)
		}
		prev = next.tok
	}
	c, cancel := context.WithTimeout(ctx(t), 300*time.Millisecond)
	defer cancel()
	if n, err := spy.WaitForNotification(c); err == nil {
		t.Errorf("a second notification, %q on %q", n.Payload, n.Channel)
	}
}
