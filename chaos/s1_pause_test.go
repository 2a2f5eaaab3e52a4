package chaos

import (
	"context"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/internal/testing/testserver"
)

// TestS1PauseMidReadModifyWrite: a holder (a separate process) reads a
// counter, is frozen (SIGSTOP) past its TTL, a second holder takes the
// lock and increments the counter, and the first resumes and writes its
// stale value. With fencing (pgfence; mysqlfence for MySQL, whose
// counter lives in the same MariaDB) the resource must reject every such
// write; without it (the negative control) the update is lost.
//
// Session-bound modes (Postgres advisory, MySQL get_lock) are left out:
// their lease is the session, which a frozen client keeps, so the second
// holder is (rightly) never granted.
func TestS1PauseMidReadModifyWrite(t *testing.T) {
	pg := testserver.Postgres(t)
	pgStore := s1Store{DB: pg.NewDatabase(t)}
	my := testserver.MariaDB(t)
	myStore := s1Store{DB: my.DSN(my.NewDatabase(t)), MySQL: true}
	backends := []struct {
		b     backend
		store s1Store
	}{
		{redisBackend(t, testserver.Redis(t)), pgStore},
		{pgBackend(t, pg, "lease"), pgStore},
		{etcdBackend(t, testserver.Etcd(t).URL()), pgStore},
		{fileBackend(t), pgStore},
		{mysqlBackend(t, my, "lease"), myStore},
	}
	for _, c := range backends {
		t.Run(c.b.Name, func(t *testing.T) {
			store, err := openCounters(context.Background(), c.store.DB, c.store.MySQL)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(store.Close)
			for _, fenced := range []bool{true, false} {
				s1Case(t, c.b, store, c.store, fenced)
			}
		})
	}
}

// s1Store says where S1's counter lives, for the test and its child.
type s1Store struct {
	DB    string // a Postgres URL or a MySQL DSN
	MySQL bool
}

func s1Case(t *testing.T, b backend, store counterStore, where s1Store, fenced bool) {
	row := Row{Scenario: "S1 pause past TTL mid read-modify-write, fenced (stale writes accepted)", Backend: b.Name,
		Expect: ExpectSafe, Metric: "pause→next grant"}
	if !fenced {
		row.Scenario = "S1 pause past TTL mid read-modify-write, unfenced control (lost updates)"
		row.Expect = ExpectViolation
	}
	locker := openLocker(t, b, dlock.WithTTL(b.TTL))
	n := trials(1)
	for i := range n {
		stale, wait, lin := s1Trial(t, b, locker, store, where, fenced, i)
		row.Trials++
		if stale {
			row.Violations++
		}
		if lin != nil {
			row.Unlinearizable++
			t.Logf("trial %d: %v", i, lin)
		}
		row.Timings = append(row.Timings, wait)
	}
	report(t, row)
}

// s1Trial runs one pause; stale is true when the paused holder's write was
// accepted after the next holder's.
func s1Trial(t *testing.T, b backend, locker *dlock.Locker, store counterStore, where s1Store, fenced bool, trial int) (stale bool, wait time.Duration, lin error) {
	ctx := context.Background()
	name := lockName("s1", trial)
	if err := store.create(ctx, name); err != nil {
		t.Fatal(err)
	}
	var h History
	a := startChild(t, childSpec{Role: roleRMW, URL: b.URL, Name: name, TTL: b.TTL, DB: where.DB, MySQL: where.MySQL, Key: name, Fenced: fenced})
	fA, callA, retA, _ := held(t, a.expect("held", time.Minute))
	h.Grant(1, fA, callA, retA)
	a.expect("read", 30*time.Second)
	a.signal(syscall.SIGSTOP)
	paused := time.Now()

	callB := time.Now()
	ls, err := locker.Acquire(ctx, name, dlock.WithWait(5*b.TTL+10*time.Second))
	if err != nil {
		t.Fatalf("second holder: %v", err)
	}
	retB := time.Now()
	h.Grant(2, ls.Fence(), callB, retB)
	cur, err := store.read(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	wcall := time.Now()
	ok, err := store.write(ctx, name, ls.Fence(), cur+1, fenced)
	if err != nil {
		t.Fatal(err)
	}
	h.Write(2, ls.Fence(), ok, wcall, time.Now())
	rcall := time.Now()
	if err := ls.Release(ctx); err != nil {
		t.Fatalf("second holder's release: %v", err)
	}
	h.End(2, rcall, time.Now())

	a.signal(syscall.SIGCONT)
	a.send("go")
	w := a.expect("wrote", 30*time.Second)
	if len(w) != 4 {
		t.Fatalf("wrote line %q", w)
	}
	okA, _ := strconv.ParseBool(w[0])
	h.Write(1, fA, okA, unixNano(w[1]), unixNano(w[2]))
	// Its lease promises nothing past its local expiry: that of the last
	// refresh it saw confirmed, before or during the pause.
	expA := unixNano(w[3])
	h.End(1, expA, expA)
	return okA, retB.Sub(paused), h.Check()
}
