package mysqllock_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/mysqllock"
)

// TestAbandonedAttemptGrantsNothing: an attempt stalled in the server
// behind a row lock when its caller gives up must not grant the lock
// when the row lock is released later, even if nobody releases its
// token: the grant commits only when its caller says so.
func TestAbandonedAttemptGrantsNothing(t *testing.T) {
	d := newDB(t)
	drv := d.locker(t, mysqllock.Config{}).Driver()
	d.exec(t, `INSERT INTO dlock_leases (name, token, fence, expires_at) VALUES ('stalled', NULL, 0, UTC_TIMESTAMP(6))`)
	tx, err := d.sql.BeginTx(ctx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	var n int
	if err := tx.QueryRowContext(ctx(t), `SELECT COUNT(*) FROM dlock_leases WHERE name = 'stalled' FOR UPDATE`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	attempt, cancel := context.WithTimeout(ctx(t), 300*time.Millisecond)
	defer cancel()
	req := driver.Request{Name: "stalled", Token: "0123456789abcdef0123456789abcdef", Owner: "gave-up", TTL: time.Minute}
	g, err := drv.TryAcquire(attempt, req)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("attempt behind a row lock: %+v, %v; want the context's deadline", g, err)
	}
	if err := tx.Commit(); err != nil { // the row lock goes: the stalled statement runs now
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		var token sql.NullString
		if err := d.sql.QueryRowContext(ctx(t), `SELECT token FROM dlock_leases WHERE name = 'stalled'`).Scan(&token); err != nil {
			t.Fatal(err)
		}
		if token.Valid {
			t.Fatalf("the abandoned attempt was granted the lock (token %s)", token.String)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestSweptNameFenceStillRises: fences are kept per name, in the name's
// row; once the sweep has deleted a released name's row, the name's next
// grant still gets a fence above every fence it had.
func TestSweptNameFenceStillRises(t *testing.T) {
	d := newDB(t)
	l := d.locker(t, mysqllock.Config{})
	var last uint64
	take := func(what string) {
		t.Helper()
		lease, err := l.TryAcquire(ctx(t), "swept")
		if err != nil {
			t.Fatal(err)
		}
		if lease.Fence() <= last {
			t.Fatalf("%s: fence %d, not above the name's last %d", what, lease.Fence(), last)
		}
		last = lease.Fence()
		if err := lease.Release(ctx(t)); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		take("a grant")
	}
	time.Sleep(10 * time.Millisecond)
	if err := mysqllock.SweepOld(ctx(t), l.Driver(), time.Millisecond); err != nil {
		t.Fatal(err)
	}
	var rows int
	if err := d.sql.QueryRowContext(ctx(t), `SELECT COUNT(*) FROM dlock_leases WHERE name = 'swept'`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 0 {
		t.Fatal("the sweep left the released row")
	}
	take("the grant after the sweep")
}

// TestMySQLGrant: the grant sent to MySQL 8 (a SYSDATE deadline guard, no
// SET STATEMENT) grants, refuses naming the holder, and raises the fence,
// as the MariaDB one does. MySQL itself is not packaged here: MariaDB
// runs it.
func TestMySQLGrant(t *testing.T) {
	d := newDB(t)
	drv := d.locker(t, mysqllock.Config{}).Driver()
	mysqllock.UseMySQLGrant(drv)
	deadline, cancel := context.WithTimeout(ctx(t), 10*time.Second)
	defer cancel()
	a := driver.Request{Name: "mysql8", Token: strings.Repeat("a", 32), Owner: "a", TTL: time.Minute}
	b := driver.Request{Name: "mysql8", Token: strings.Repeat("b", 32), Owner: "b", TTL: time.Minute}
	ga, err := drv.TryAcquire(deadline, a)
	if err != nil || !ga.Acquired {
		t.Fatalf("first grant: %+v, %v", ga, err)
	}
	if g, err := drv.TryAcquire(deadline, b); err != nil || g.Acquired || g.Holder.Owner != "a" {
		t.Fatalf("attempt on a held row: %+v, %v; want a refusal naming a", g, err)
	}
	if err := drv.Release(deadline, a.Name, a.Token); err != nil {
		t.Fatal(err)
	}
	time.Sleep(600 * time.Millisecond) // past the hand-on grace of a keyed release
	gb, err := drv.TryAcquire(deadline, b)
	if err != nil || !gb.Acquired || gb.Fence <= ga.Fence {
		t.Fatalf("grant after the release: %+v, %v; want a fence above %d", gb, err, ga.Fence)
	}
}
