package pglock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/pglock"
	"github.com/jackc/pgx/v5"
)

// TestAdvisoryWaitEndsInServer: a bounded advisory wait is ended by the
// server (lock_timeout a little before the deadline), so when Acquire
// returns nothing is left queued for the lock: no request a release could
// grant to a waiter that gave up (it would hold the lock until its
// connection closed). A cancel sent at the deadline, as before, lands
// later. The waiter reports the holder it queued behind.
func TestAdvisoryWaitEndsInServer(t *testing.T) {
	d := newDB(t)
	c := ctx(t)
	holder := d.locker(t, pglock.Config{Mode: pglock.Advisory})
	waiter := d.locker(t, pglock.Config{Mode: pglock.Advisory})
	ls, err := holder.Acquire(c, "bounded-wait", dlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer ls.Release(c)
	for i := range 5 {
		_, err := waiter.Acquire(c, "bounded-wait", dlock.WithWait(time.Duration(50+50*i)*time.Millisecond))
		var held *dlock.HeldError
		if !errors.As(err, &held) {
			t.Fatalf("bounded wait = %v, want a HeldError", err)
		}
		var queued int
		if err := d.admin.QueryRow(c, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`).Scan(&queued); err != nil {
			t.Fatal(err)
		}
		if queued != 0 {
			t.Fatalf("wait %d: %d advisory requests still queued when Acquire returned, want 0", i, queued)
		}
	}
}

// TestAdvisoryTimedOutWaitLeavesNoLock: a grant can land just as a
// bounded wait times out in the server; the statement fails with
// lock_not_available, yet Postgres keeps the lock granted to the session.
// Such a connection must not go back to the pool holding the lock (it
// would hold it for as long as it lives, and hand it to whoever the pool
// gives it to next, advisory locks being re-entrant). Contenders whose
// waits all end at one deadline, in rounds, make the race frequent (it
// left a lock behind in every round before the fix); once they stop, no
// backend may still hold the lock, and a fresh TryAcquire must get it.
func TestAdvisoryTimedOutWaitLeavesNoLock(t *testing.T) {
	d := newDB(t)
	c := ctx(t)
	const workers = 16
	lockers := make([]*dlock.Locker, workers)
	for i := range lockers {
		lockers[i] = d.locker(t, pglock.Config{Mode: pglock.Advisory})
	}
	var timedOut atomic.Int64
	for range 6 {
		round, cancel := context.WithTimeout(c, 300*time.Millisecond)
		var wg sync.WaitGroup
		for _, l := range lockers {
			wg.Go(func() {
				for round.Err() == nil {
					ls, err := l.Acquire(round, "timed-out-waits", dlock.WithWait(dlock.Forever), dlock.WithTTL(time.Minute))
					if err != nil {
						timedOut.Add(1)
						continue
					}
					if err := ls.Release(c); err != nil {
						t.Errorf("release: %v", err)
						return
					}
					time.Sleep(time.Millisecond)
				}
			})
		}
		wg.Wait()
		cancel()
	}
	if timedOut.Load() == 0 {
		t.Fatal("no wait timed out: the test did not exercise the race")
	}
	// A destroyed connection's backend frees its locks when it exits,
	// within moments; a lock still held after that is a leak.
	deadline := time.Now().Add(3 * time.Second)
	for {
		var holders []string
		rows, err := d.admin.Query(c, `SELECT l.pid::text || ' (' || coalesce(a.state, '?') || ', last: ' || coalesce(left(a.query, 40), '?') || ')'
			FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = 'advisory' AND l.granted`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var h string
			if err := rows.Scan(&h); err != nil {
				t.Fatal(err)
			}
			holders = append(holders, h)
		}
		rows.Close()
		if len(holders) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %d timed-out waits and every lease released, backends still hold the lock: %v", timedOut.Load(), holders)
		}
		time.Sleep(50 * time.Millisecond)
	}
	ls, err := lockers[0].TryAcquire(c, "timed-out-waits")
	if err != nil {
		t.Fatalf("TryAcquire after the contention: %v", err)
	}
	_ = ls.Release(c)
}

// TestAdvisoryLapsedWaiterGivesTheLockBack: a release hands the lock to
// the first backend queued for it, even one whose caller has given up and
// whose server-side bound has fired, when that backend has not run since
// (a loaded machine). It holds the lock until it runs again. Here that
// backend is stopped (SIGSTOP) while it waits, until its caller has
// returned and the holder has released; a TryAcquire then finds it
// holding the lock. The backend's statement carries the end of its wait
// (advisoryMarkWait), so the try knows the holder is a waiter past its
// end, about to give the lock back, and waits for it: it gets the lock
// once the backend runs (SIGCONT). Without the mark, the try reported the
// lock held by that backend.
func TestAdvisoryLapsedWaiterGivesTheLockBack(t *testing.T) {
	d := newDB(t)
	c := ctx(t)
	holder := d.locker(t, pglock.Config{Mode: pglock.Advisory})
	waiter := d.locker(t, pglock.Config{Mode: pglock.Advisory})
	other := d.locker(t, pglock.Config{Mode: pglock.Advisory})
	ls, err := holder.Acquire(c, "lapsed-waiter", dlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() {
		_, err := waiter.Acquire(c, "lapsed-waiter", dlock.WithWait(500*time.Millisecond))
		waited <- err
	}()
	var pid int
	for deadline := time.Now().Add(5 * time.Second); ; {
		err := d.admin.QueryRow(c, `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`).Scan(&pid)
		if err == nil {
			break
		}
		if !errors.Is(err, pgx.ErrNoRows) || time.Now().After(deadline) {
			t.Fatalf("the waiter's backend never queued: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Skipf("cannot stop the server's backend %d: %v", pid, err)
	}
	cont := sync.OnceFunc(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
	defer cont()
	if err := <-waited; !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("the stopped waiter's Acquire = %v, want ErrNotAcquired", err)
	}
	if err := ls.Release(c); err != nil {
		t.Fatal(err)
	}
	var granted bool
	if err := d.admin.QueryRow(c, `SELECT granted FROM pg_locks WHERE locktype = 'advisory' AND pid = $1`, pid).Scan(&granted); err != nil || !granted {
		t.Fatalf("the release did not hand the lock to the stopped backend (granted %v, %v): the test did not set up the race", granted, err)
	}
	time.AfterFunc(30*time.Millisecond, cont)
	got, err := other.TryAcquire(c, "lapsed-waiter")
	if err != nil {
		t.Fatalf("TryAcquire while a waiter past its end holds the lock: %v, want the lock once that backend runs", err)
	}
	_ = got.Release(c)
}
