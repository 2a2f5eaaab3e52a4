package mysqllock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/mysqllock"
)

// TestGetLockFencesRiseAboveTheCounter: a database whose get_lock fences
// came from the counter row (the sequence missing, the counter at 500)
// gets, from Migrate, a sequence that starts above it, and the next
// grant's fence is above every fence the counter gave.
func TestGetLockFencesRiseAboveTheCounter(t *testing.T) {
	d := newDB(t)
	d.exec(t, "DROP SEQUENCE dlock_leases_seq")
	d.exec(t, "UPDATE dlock_leases_fences SET v = 500 WHERE id = 1")
	migrate(t, d.sql, mysqllock.Config{Mode: mysqllock.GetLock})
	l := d.locker(t, mysqllock.Config{Mode: mysqllock.GetLock})
	ls, err := l.TryAcquire(ctx(t), "job")
	if err != nil {
		t.Fatal(err)
	}
	defer ls.Release(ctx(t))
	if ls.Fence() <= 500 {
		t.Fatalf("fence %d after a counter at 500, want above it", ls.Fence())
	}
}

// TestGetLockReleasedRowsNeitherCountNorStay: a release leaves its holder
// row, which List and Inspect do not count; the monitor of a Locker that
// holds a lock deletes it.
func TestGetLockReleasedRowsNeitherCountNorStay(t *testing.T) {
	d := newDB(t)
	cfg := mysqllock.Config{Mode: mysqllock.GetLock}
	l := d.locker(t, cfg)
	ls, err := l.TryAcquire(ctx(t), "gone/a", dlock.WithOwner("a"))
	if err != nil {
		t.Fatal(err)
	}
	if err := ls.Release(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if hs, err := l.List(ctx(t), "gone/"); err != nil || len(hs) != 0 {
		t.Fatalf("List after the release = %+v, %v; want none", hs, err)
	}
	if h, ok, err := l.Inspect(ctx(t), "gone/a"); err != nil || ok {
		t.Fatalf("Inspect after the release = %+v, %v, %v; want free", h, ok, err)
	}
	if n := rowsOf(t, d, "gone/a"); n != 1 {
		t.Fatalf("%d holder rows after the release, want the one left", n)
	}
	// Another pool: its grant must not reuse the released lock's
	// connection, whose next grant would replace the row.
	other, err := cfg.Locker(openSQL(t, d.srv.DSN(d.name)))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	held, err := other.TryAcquire(ctx(t), "held")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(ctx(t))
	deadline := time.Now().Add(10 * time.Second)
	for {
		if rowsOf(t, d, "gone/a") == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the released lock's holder row is still there %s after another lock was taken", 10*time.Second)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// rowsOf counts name's rows in the holders table.
func rowsOf(t *testing.T, d *db, name string) int {
	t.Helper()
	var n int
	if err := d.sql.QueryRowContext(ctx(t), "SELECT COUNT(*) FROM dlock_leases_holders WHERE name = ?", name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestGetLockGrantWithoutItsRowFails: a grant whose holder row cannot be
// written (the holders table gone) is no grant, with no wait (one
// statement) and with one (in one message, or statement by statement),
// and leaves the lock free: a lock held without its row would be missing
// from List, which the primitives read.
func TestGetLockGrantWithoutItsRowFails(t *testing.T) {
	for _, params := range []string{"", "?multiStatements=false"} {
		d := newDB(t)
		d.exec(t, "DROP TABLE dlock_leases_holders")
		l, err := dlock.Open(ctx(t), d.url+params+map[bool]string{true: "?", false: "&"}[params == ""]+"mode=get_lock")
		if err != nil {
			t.Fatal(err)
		}
		for _, wait := range []time.Duration{0, time.Second} {
			if ls, err := l.Acquire(ctx(t), "job", dlock.WithWait(wait)); err == nil {
				t.Errorf("%q, wait %s: granted fence %d without a holder row, want an error", params, wait, ls.Fence())
			}
			var free int
			if err := d.sql.QueryRowContext(ctx(t), "SELECT IS_FREE_LOCK(?)", mysqllock.Key("job")).Scan(&free); err != nil || free != 1 {
				t.Errorf("%q, wait %s: IS_FREE_LOCK after the failed grant = %d, %v; want 1", params, wait, free, err)
			}
		}
		_ = l.Close()
	}
}

// TestGetLockNoWaitGrantIsWatched: a lock taken with no wait (one
// statement, which does not return its connection's id) is watched like
// any other: the monitor keeps it while its connection holds the key,
// and ends it when the connection is killed, before and after it has
// learnt the connection's id. The TTL is long: only the monitor can see
// the loss in time.
func TestGetLockNoWaitGrantIsWatched(t *testing.T) {
	d := newDB(t)
	l := d.locker(t, mysqllock.Config{Mode: mysqllock.GetLock})
	try := func(name string) *dlock.Lease {
		ls, err := l.TryAcquire(ctx(t), name, dlock.WithTTL(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ls.Release(ctx(t)) })
		return ls
	}
	lostWithin := func(ls *dlock.Lease, why string) {
		t.Helper()
		select {
		case <-ls.Done():
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the lease is still held 10 s after its connection was killed", why)
		}
	}
	kept := try("watched/kept")
	killedLate := try("watched/late")
	killedAtOnce := try("watched/at-once")
	d.killHolder(t, "watched/at-once")
	lostWithin(killedAtOnce, "killed at once")
	time.Sleep(5 * mysqllock.MonitorEvery)
	select {
	case <-kept.Done():
		t.Fatalf("a lock whose connection holds its key was ended: %v", kept.Err())
	case <-killedLate.Done():
		t.Fatalf("a lock whose connection holds its key was ended: %v", killedLate.Err())
	default:
	}
	d.killHolder(t, "watched/late")
	lostWithin(killedLate, "killed after the monitor learnt its connection")
	if err := kept.Release(ctx(t)); err != nil {
		t.Fatalf("releasing the lock left alone: %v", err)
	}
}

// TestMySQLGetLockGrant: get_lock mode as it runs on MySQL 8, which has
// no sequences (GET_LOCK, the counter's UPDATE and the holder row, one
// statement each), grants, refuses naming the holder, releases, and
// draws fences from the counter above every earlier one, for a grant and
// for a force-release. MySQL itself is not packaged here: MariaDB runs
// the same statements.
func TestMySQLGetLockGrant(t *testing.T) {
	d := newDB(t)
	drv := d.locker(t, mysqllock.Config{Mode: mysqllock.GetLock}).Driver()
	mysqllock.UseMySQLGrant(drv)
	deadline, cancel := context.WithTimeout(ctx(t), 10*time.Second)
	defer cancel()
	a := driver.Request{Name: "mysql8", Token: strings.Repeat("a", 32), Owner: "a", TTL: time.Minute}
	b := driver.Request{Name: "mysql8", Token: strings.Repeat("b", 32), Owner: "b", TTL: time.Minute}
	counter := func() uint64 {
		var v uint64
		if err := d.sql.QueryRowContext(deadline, "SELECT v FROM dlock_leases_fences WHERE id = 1").Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	before := counter()
	ga, err := drv.TryAcquire(deadline, a)
	if err != nil || !ga.Acquired {
		t.Fatalf("first grant: %+v, %v", ga, err)
	}
	if after := counter(); after != before+1 || ga.Fence != after {
		t.Fatalf("counter %d → %d for a grant with fence %d: want the fence drawn from it", before, after, ga.Fence)
	}
	if g, err := drv.TryAcquire(deadline, b); err != nil || g.Acquired || g.Holder.Owner != "a" {
		t.Fatalf("attempt on a held lock: %+v, %v; want a refusal naming a", g, err)
	}
	if err := drv.Release(deadline, a.Name, a.Token); err != nil {
		t.Fatal(err)
	}
	gb, err := drv.TryAcquire(deadline, b)
	if err != nil || !gb.Acquired || gb.Fence <= ga.Fence {
		t.Fatalf("grant after the release: %+v, %v; want a fence above %d", gb, err, ga.Fence)
	}
	fr, ok := drv.(driver.ForceReleaser)
	if !ok {
		t.Fatal("get_lock mode is not a driver.ForceReleaser")
	}
	h, held, fence, err := fr.ForceRelease(deadline, b.Name)
	if err != nil || !held || h.Owner != "b" || fence <= gb.Fence {
		t.Fatalf("ForceRelease = %+v, %v, fence %d, %v; want b evicted and a fence above %d", h, held, fence, err, gb.Fence)
	}
}
