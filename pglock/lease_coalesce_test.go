package pglock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/pglock"
	"github.com/jackc/pgx/v5"
)

// coalescedTracer counts the statements that carry coalesced calls, and
// those of them that failed, and keeps the names each carried and the
// rows each returned.
type coalescedTracer struct {
	sent, failed atomic.Int64
	mu           sync.Mutex
	names        [][]string
	rows         map[int]int64 // by statement number
}

// carried is the names of each coalesced statement sent since the
// (sent-counted) statement number from.
func (c *coalescedTracer) carried(from int64) [][]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.names[from:])
}

type coalescedKey struct{}

func (c *coalescedTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.HasPrefix(d.SQL, "-- coalesced") {
		c.mu.Lock()
		names, _ := d.Args[0].([]string)
		c.names = append(c.names, names)
		n := len(c.names) - 1
		c.sent.Add(1)
		c.mu.Unlock()
		return context.WithValue(ctx, coalescedKey{}, n)
	}
	return ctx
}

func (c *coalescedTracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryEndData) {
	n, ok := ctx.Value(coalescedKey{}).(int)
	switch {
	case !ok:
	case d.Err != nil:
		c.failed.Add(1)
	default:
		c.mu.Lock()
		if c.rows == nil {
			c.rows = map[int]int64{}
		}
		c.rows[n] = d.CommandTag.RowsAffected()
		c.mu.Unlock()
	}
}

// coalescedDriver is a lease-mode driver on a pool whose coalesced
// statements are counted.
func coalescedDriver(t *testing.T, d *db) (driver.Driver, *coalescedTracer) {
	t.Helper()
	tr := &coalescedTracer{}
	pool := tracedPool(t, d.url+"&pool_max_conns=20", tr, 10)
	drv, err := pglock.Config{}.Driver(pool)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = drv.Close() })
	return drv, tr
}

// together makes the calls of queued, each on a goroutine of its own, go
// in one statement: first as many calls as the driver keeps in flight
// (block) wait in the server on rows an open transaction locked, then
// queued are made and wait behind them, and then the transaction ends.
// block's names must have rows (a lease or a tombstone).
func together(t *testing.T, d *db, drv driver.Driver, block []string, blocked func(name string), queued []func()) {
	t.Helper()
	c := ctx(t)
	tx, err := d.admin.Begin(c)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(c) }()
	if _, err := tx.Exec(c, `SELECT 1 FROM dlock_leases WHERE name = ANY ($1) FOR UPDATE`, block); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for _, name := range block {
		wg.Go(func() { blocked(name) })
	}
	waitUntil(t, "the blocked statements wait on their rows", func() bool {
		var n int
		err := d.admin.QueryRow(c, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n)
		return err == nil && n == len(block)
	})
	for _, f := range queued {
		wg.Go(f)
	}
	waitUntil(t, "the calls queue behind them", func() bool { return pglock.CoalescedWaiting(drv) == len(queued) })
	if err := tx.Commit(c); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
}

func waitUntil(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for end := time.Now().Add(30 * time.Second); !ok(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting until %s", what)
		}
	}
}

// blockers are names whose rows the driver's in-flight statements wait
// on in together: leased by token "blocker" and released, so that their
// rows exist.
func blockers(t *testing.T, drv driver.Driver) []string {
	t.Helper()
	var names []string
	for i := range pglock.CoalesceSends {
		name := fmt.Sprintf("block/%d", i)
		req := driver.Request{Name: name, Token: "blocker-" + name, Owner: "blocker", TTL: time.Minute}
		if g, err := drv.TryAcquire(ctx(t), req); err != nil || !g.Acquired {
			t.Fatalf("TryAcquire %s = %+v, %v", name, g, err)
		}
		if err := drv.Release(ctx(t), name, req.Token); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	return names
}

// TestCoalescedTriesDecideEachAlone: tries made at the same moment go in
// one statement, and each is answered as it would be alone: a free name
// and an expired lease are granted (the expired one with a higher fence),
// a live lease of another token refuses and names its owner, a released
// token is refused as released, and of two tries on one name exactly one
// wins.
func TestCoalescedTriesDecideEachAlone(t *testing.T) {
	d := newDB(t)
	drv, tr := coalescedDriver(t, d)
	c := ctx(t)
	take := func(name, token, owner string, ttl time.Duration) driver.Grant {
		g, err := drv.TryAcquire(c, driver.Request{Name: name, Token: token, Owner: owner, TTL: ttl})
		if err != nil || !g.Acquired {
			t.Fatalf("TryAcquire %s = %+v, %v", name, g, err)
		}
		return g
	}
	take("held", "other", "the other owner", time.Minute)
	old := take("expired", "gone", "", time.Millisecond)
	take("dead", "dead-token", "", time.Minute)
	if err := drv.Release(c, "dead", "dead-token"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond) // "expired" runs out
	block := blockers(t, drv)

	type outcome struct {
		g   driver.Grant
		err error
	}
	reqs := []driver.Request{
		{Name: "free", Token: "t-free", Owner: "me", TTL: time.Minute},
		{Name: "held", Token: "t-held", Owner: "me", TTL: time.Minute},
		{Name: "expired", Token: "t-expired", Owner: "me", TTL: time.Minute},
		{Name: "dead", Token: "dead-token", Owner: "me", TTL: time.Minute},
		{Name: "dup", Token: "t-dup-1", Owner: "dup 1", TTL: time.Minute},
		{Name: "dup", Token: "t-dup-2", Owner: "dup 2", TTL: time.Minute},
	}
	got := make([]outcome, len(reqs))
	var queued []func()
	for i, req := range reqs {
		queued = append(queued, func() {
			g, err := drv.TryAcquire(c, req)
			got[i] = outcome{g, err}
		})
	}
	sent := tr.sent.Load()
	together(t, d, drv, block, func(name string) {
		if _, err := drv.TryAcquire(c, driver.Request{Name: name, Token: "t-" + name, Owner: "me", TTL: time.Minute}); err != nil {
			t.Error(err)
		}
	}, queued)
	if n := tr.sent.Load() - sent; n != 1 {
		t.Fatalf("%d coalesced statements for %d tries made together, want 1", n, len(reqs))
	}
	for i, want := range []bool{true, false, true} {
		if o := got[i]; o.err != nil || o.g.Acquired != want {
			t.Errorf("try on %s: %+v, %v; want acquired %v", reqs[i].Name, o.g, o.err, want)
		}
	}
	if o := got[1]; o.g.Holder.Owner != "the other owner" {
		t.Errorf("the refused try names the holder %q, want %q", o.g.Holder.Owner, "the other owner")
	}
	if o := got[2]; o.g.Fence <= old.Fence {
		t.Errorf("the expired lease was granted with fence %d, not above the expired one's %d", o.g.Fence, old.Fence)
	}
	if o := got[3]; o.err == nil || o.g.Acquired {
		t.Errorf("a try with a released token: %+v, %v; want an error", o.g, o.err)
	}
	a, b := got[4], got[5]
	if a.err != nil || b.err != nil || a.g.Acquired == b.g.Acquired {
		t.Fatalf("two tries on one name: %+v, %v and %+v, %v; want exactly one granted", a.g, a.err, b.g, b.err)
	}
	winner, loser := a, b
	if b.g.Acquired {
		winner, loser = b, a
	}
	if want := map[bool]string{true: "dup 2", false: "dup 1"}[b.g.Acquired]; loser.g.Holder.Owner != want {
		t.Errorf("the losing try on one name names %q, want the winner %q (fence %d)", loser.g.Holder.Owner, want, winner.g.Fence)
	}
}

// TestCoalescedReleasesDecideEachAlone: releases made at the same moment
// go in one statement, and each is answered as it would be alone: a held
// lease and an expired one nobody took are freed, a lease taken over
// says so, a name never held says expired; and each released token is
// remembered, so that an attempt of it that the server runs late grants
// nothing.
func TestCoalescedReleasesDecideEachAlone(t *testing.T) {
	d := newDB(t)
	drv, tr := coalescedDriver(t, d)
	c := ctx(t)
	take := func(name, token string, ttl time.Duration) {
		if g, err := drv.TryAcquire(c, driver.Request{Name: name, Token: token, TTL: ttl}); err != nil || !g.Acquired {
			t.Fatalf("TryAcquire %s = %+v, %v", name, g, err)
		}
	}
	take("held", "t-held", time.Minute)
	take("lapsed", "t-lapsed", time.Millisecond)
	take("taken", "t-taken", time.Millisecond)
	time.Sleep(10 * time.Millisecond)
	take("taken", "t-thief", time.Minute)
	block := blockers(t, drv)
	for _, name := range block { // held again, to be released while blocked
		take(name, "t-"+name, time.Minute)
	}

	rels := [][2]string{{"held", "t-held"}, {"lapsed", "t-lapsed"}, {"taken", "t-taken"}, {"never", "t-never"}}
	got := make([]error, len(rels))
	var queued []func()
	for i, r := range rels {
		queued = append(queued, func() { got[i] = drv.Release(c, r[0], r[1]) })
	}
	sent := tr.sent.Load()
	together(t, d, drv, block, func(name string) {
		if err := drv.Release(c, name, "t-"+name); err != nil {
			t.Error(err)
		}
	}, queued)
	if n := tr.sent.Load() - sent; n != 1 {
		t.Fatalf("%d coalesced statements for %d releases made together, want 1", n, len(rels))
	}
	for i, want := range []error{nil, nil, driver.ErrTakenOver, driver.ErrExpired} {
		if !errors.Is(got[i], want) || (want == nil && got[i] != nil) {
			t.Errorf("release of %s: %v, want %v", rels[i][0], got[i], want)
		}
	}
	for _, r := range rels {
		if r[0] == "taken" {
			continue // held by the thief
		}
		g, err := drv.TryAcquire(c, driver.Request{Name: r[0], Token: r[1], TTL: time.Minute})
		if err == nil || g.Acquired {
			t.Errorf("after its release, a try of %s's token: %+v, %v; want refused as released", r[0], g, err)
		}
	}
	if g, err := drv.TryAcquire(c, driver.Request{Name: "held", Token: "next", TTL: time.Minute}); err != nil || !g.Acquired {
		t.Errorf("after the release, a new try on held: %+v, %v; want granted", g, err)
	}
}

// TestCoalescedWaitsDecideEachAlone: waiters' attempts made at the same
// moment go in one statement, and each is answered as it would be alone:
// a free name (no row yet), an expired lease and a released one are
// granted, the expired one with a higher fence; a waiter on a live lease
// of another token joins that row's queue, behind the one queued before
// it; a released token is refused as released; and of two waiters on one
// name, exactly one is granted and the other queues.
func TestCoalescedWaitsDecideEachAlone(t *testing.T) {
	d := newDB(t)
	drv, tr := coalescedDriver(t, d)
	q := drv.(driver.Queuer)
	c := ctx(t)
	take := func(name, token string, ttl time.Duration) driver.Grant {
		g, err := drv.TryAcquire(c, driver.Request{Name: name, Token: token, Owner: "other", TTL: ttl})
		if err != nil || !g.Acquired {
			t.Fatalf("TryAcquire %s = %+v, %v", name, g, err)
		}
		return g
	}
	take("held", "other", time.Minute)
	d.exec(t, `UPDATE dlock_leases SET waiters = '{first@elsewhere}' WHERE name = 'held'`)
	old := take("expired", "gone", time.Millisecond)
	take("released", "r", time.Minute)
	take("dead", "dead-token", time.Minute)
	for _, r := range [][2]string{{"released", "r"}, {"dead", "dead-token"}} {
		if err := drv.Release(c, r[0], r[1]); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(10 * time.Millisecond) // "expired" runs out
	block := blockers(t, drv)

	type outcome struct {
		g   driver.Grant
		err error
	}
	reqs := []driver.Request{
		{Name: "free", Token: "t-free", Owner: "me", TTL: time.Minute},
		{Name: "expired", Token: "t-expired", Owner: "me", TTL: time.Minute},
		{Name: "released", Token: "t-released", Owner: "me", TTL: time.Minute},
		{Name: "held", Token: "t-held", Owner: "me", TTL: time.Minute},
		{Name: "dead", Token: "dead-token", Owner: "me", TTL: time.Minute},
		{Name: "dup", Token: "t-dup-1", Owner: "dup 1", TTL: time.Minute},
		{Name: "dup", Token: "t-dup-2", Owner: "dup 2", TTL: time.Minute},
	}
	got := make([]outcome, len(reqs))
	var queued []func()
	for i, req := range reqs {
		queued = append(queued, func() {
			// A waiter that queues waits until its context ends.
			wc, cancel := context.WithTimeout(c, 2*time.Second)
			defer cancel()
			g, err := q.AcquireWait(wc, req)
			got[i] = outcome{g, err}
		})
	}
	sent, failed := tr.sent.Load(), tr.failed.Load()
	together(t, d, drv, block, func(name string) {
		if _, err := q.AcquireWait(c, driver.Request{Name: name, Token: "t-" + name, Owner: "me", TTL: time.Minute}); err != nil {
			t.Error(err)
		}
	}, queued)
	want := []string{"dead", "dup", "expired", "free", "held", "released"}
	if carried := tr.carried(sent); len(carried) == 0 || !slices.Equal(carried[0], want) {
		t.Fatalf("the coalesced statements carried %q; want the first to carry %q", carried, want)
	}
	// Five answers: three grants, the queued waiter, and one of dup's two
	// (the other is sent alone after).
	if n := tr.failed.Load() - failed; n != 0 {
		t.Fatalf("%d coalesced statements failed", n)
	}
	tr.mu.Lock()
	rows := tr.rows[int(sent)]
	tr.mu.Unlock()
	if rows != 5 {
		t.Errorf("the coalesced statement answered %d items, want 5 (the released token none)", rows)
	}
	for i := range 3 {
		if o := got[i]; o.err != nil || !o.g.Acquired {
			t.Errorf("wait on %s: %+v, %v; want granted", reqs[i].Name, o.g, o.err)
		}
	}
	if o := got[1]; o.g.Fence <= old.Fence {
		t.Errorf("the expired lease was granted with fence %d, not above the expired one's %d", o.g.Fence, old.Fence)
	}
	if o := got[3]; !errors.Is(o.err, context.DeadlineExceeded) || o.g.Holder.Owner != "other" {
		t.Errorf("wait on a held lock: %+v, %v; want to wait, behind owner %q", o.g, o.err, "other")
	}
	if o := got[4]; o.err == nil || errors.Is(o.err, context.DeadlineExceeded) || o.g.Acquired {
		t.Errorf("a wait with a released token: %+v, %v; want refused at once", o.g, o.err)
	}
	a, b := got[5], got[6]
	if a.g.Acquired == b.g.Acquired || (a.err == nil) == (b.err == nil) {
		t.Errorf("two waits on one name: %+v, %v and %+v, %v; want one granted, the other waiting", a.g, a.err, b.g, b.err)
	}
	for name, want := range map[string]string{"held": "first@elsewhere,t-held@", "dup": "t-dup-"} {
		var waiters string
		if err := d.admin.QueryRow(c, `SELECT array_to_string(waiters, ',') FROM dlock_leases WHERE name = $1`, name).Scan(&waiters); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(waiters, want) {
			t.Errorf("the queue of %s is %s, want it to start %s...", name, waiters, want)
		}
	}
}

// TestCoalescedStatementFailureFailsOneCall: when the statement that
// carries several tries, or several waiters' attempts, fails (here a
// trigger rejects one of its names), the calls are sent again one by one:
// the others are granted, and only the call on the rejected name fails.
func TestCoalescedStatementFailureFailsOneCall(t *testing.T) {
	for _, kind := range []string{"try", "wait"} {
		t.Run(kind, func(t *testing.T) {
			d := newDB(t)
			drv, tr := coalescedDriver(t, d)
			c := ctx(t)
			call := func(name string) (driver.Grant, error) {
				req := driver.Request{Name: name, Token: "t-" + name, TTL: time.Minute}
				if kind == "wait" {
					return drv.(driver.Queuer).AcquireWait(c, req)
				}
				return drv.TryAcquire(c, req)
			}
			block := blockers(t, drv)
			d.exec(t, `CREATE FUNCTION reject_poison() RETURNS trigger LANGUAGE plpgsql AS
				$$ BEGIN RAISE EXCEPTION 'poison is refused here'; END $$`)
			d.exec(t, `CREATE TRIGGER reject_poison BEFORE INSERT OR UPDATE ON dlock_leases
				FOR EACH ROW WHEN (NEW.name = 'poison') EXECUTE FUNCTION reject_poison()`)
			names := []string{"fine/1", "poison", "fine/2"}
			got := make([]error, len(names))
			granted := make([]bool, len(names))
			var queued []func()
			for i, name := range names {
				queued = append(queued, func() {
					g, err := call(name)
					got[i], granted[i] = err, g.Acquired
				})
			}
			failed := tr.failed.Load()
			together(t, d, drv, block, func(name string) {
				if _, err := call(name); err != nil {
					t.Error(err)
				}
			}, queued)
			if n := tr.failed.Load() - failed; n != 1 {
				t.Fatalf("%d coalesced statements failed, want the one that carried poison", n)
			}
			for i, name := range names {
				switch {
				case name == "poison" && (got[i] == nil || !strings.Contains(got[i].Error(), "poison is refused here")):
					t.Errorf("%s on poison: %v, want the trigger's error", kind, got[i])
				case name != "poison" && (got[i] != nil || !granted[i]):
					t.Errorf("%s on %s, sent with poison: granted %v, %v; want granted", kind, name, granted[i], got[i])
				}
			}
		})
	}
}
