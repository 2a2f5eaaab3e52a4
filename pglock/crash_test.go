package pglock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	"github.com/dlockdev/dlock/pglock"
)

// grantAt is one grant seen by a crash test: its fence, when its attempt
// started and when it returned.
type grantAt struct {
	fence         uint64
	sent, granted time.Time
}

// TestCrashFencesNeverGoBack kills the postmaster and every backend with
// SIGKILL mid-run, three times, in each mode, with grants in flight, and
// checks that every fence granted by an attempt started after a restart
// exceeds every fence granted before the crash. (The test server runs
// with fsync off: a SIGKILL loses what PostgreSQL had not yet written to
// the kernel, which is what a crash of the server process loses; an OS
// crash would also lose what was not fsynced.)
func TestCrashFencesNeverGoBack(t *testing.T) {
	srv := testserver.NewPostgres(t)
	admin := newPool(t, srv.URL())
	for _, cfg := range modes {
		migrate(t, admin, cfg)
	}
	admin.Close()
	for _, cfg := range modes {
		t.Run(string(cfg.Mode), func(t *testing.T) {
			l, err := cfg.Locker(newPool(t, srv.URL()+"&pool_max_conns=12"), dlock.WithTTL(time.Second))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			for round := range 3 {
				before, after := crashRound(t, srv, l)
				var maxBefore, minAfter uint64 = 0, ^uint64(0)
				for _, g := range before {
					maxBefore = max(maxBefore, g.fence)
				}
				for _, g := range after {
					minAfter = min(minAfter, g.fence)
				}
				t.Logf("round %d: %d grants before the crash (highest fence %d), %d after the restart (lowest %d)",
					round, len(before), maxBefore, len(after), minAfter)
				if len(before) == 0 || len(after) == 0 {
					t.Fatalf("round %d: %d grants before, %d after: nothing to compare", round, len(before), len(after))
				}
				if minAfter <= maxBefore {
					t.Errorf("round %d: fence %d granted after the restart, not above %d granted before the crash", round, minAfter, maxBefore)
				}
			}
		})
	}
}

// crashRound runs workers taking and releasing locks, kills the server
// mid-run, restarts it, and returns the grants returned before the kill
// and those whose attempt started after the restart.
func crashRound(t *testing.T, srv *testserver.PostgresServer, l *dlock.Locker) (before, after []grantAt) {
	var (
		mu     sync.Mutex
		grants []grantAt
		wg     sync.WaitGroup
	)
	stop := make(chan struct{})
	for w := range 6 {
		wg.Go(func() {
			name := fmt.Sprintf("crash/%d", w%3) // two workers per name
			for {
				select {
				case <-stop:
					return
				default:
				}
				c, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
				sent := time.Now()
				ls, err := l.TryAcquire(c, name)
				cancel()
				if err != nil {
					time.Sleep(5 * time.Millisecond)
					continue
				}
				mu.Lock()
				grants = append(grants, grantAt{ls.Fence(), sent, time.Now()})
				mu.Unlock()
				_ = ls.Release(context.Background())
			}
		})
	}
	time.Sleep(400 * time.Millisecond)
	killed := time.Now()
	srv.Kill()
	srv.Restart(t)
	restarted := time.Now()
	time.Sleep(1500 * time.Millisecond) // lease rows of the crash outlive it by their TTL
	close(stop)
	wg.Wait()
	for _, g := range grants {
		switch {
		case g.granted.Before(killed):
			before = append(before, g)
		case g.sent.After(restarted):
			after = append(after, g)
		}
	}
	return before, after
}

// TestAdvisoryLossToldAtOnce: after a crash and restart, the holder's
// session is known to be gone before anyone else can take the lock (its
// pinned connection's watcher sees the socket close), and its Refresh
// fails at once with driver.ErrSessionEnded.
func TestAdvisoryLossToldAtOnce(t *testing.T) {
	srv := testserver.NewPostgres(t)
	migrate(t, newPool(t, srv.URL()), pglock.Config{Mode: pglock.Advisory})
	cfg := pglock.Config{Mode: pglock.Advisory}
	for trial := range 3 {
		l, err := cfg.Locker(newPool(t, srv.URL()))
		if err != nil {
			t.Fatal(err)
		}
		ls, err := l.Acquire(ctx(t), "told", dlock.WithTTL(30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond) // past watchDelay: the session is watched
		killed := time.Now()
		srv.Kill()
		// The portable layer watches the session (driver.SessionWatcher):
		// the holder is told before the server is even back, long before
		// its next refresh (TTL/3 = 10 s).
		select {
		case <-ls.Done():
			t.Logf("trial %d: holder told %s after the kill: %v", trial, time.Since(killed), ls.Err())
		case <-time.After(5 * time.Second):
			t.Fatalf("trial %d: holder not told 5s after the kill", trial)
		}
		var le *dlock.LostError
		if !errors.As(ls.Err(), &le) || le.Reason != dlock.LostSession {
			t.Errorf("trial %d: Err = %v, want a LostError (%s)", trial, ls.Err(), dlock.LostSession)
		}
		srv.Restart(t)
		start := time.Now()
		err = l.Driver().Refresh(ctx(t), "told", ls.Token(), 30*time.Second)
		if !errors.Is(err, driver.ErrSessionEnded) {
			t.Errorf("trial %d: Refresh after the crash = %v, want ErrSessionEnded", trial, err)
		}
		t.Logf("trial %d: Refresh answered in %s", trial, time.Since(start))
		other, err := cfg.Locker(newPool(t, srv.URL()))
		if err != nil {
			t.Fatal(err)
		}
		ls2, err := other.Acquire(ctx(t), "told", dlock.WithWait(10*time.Second))
		if err != nil {
			t.Fatalf("trial %d: second Locker after the restart: %v", trial, err)
		}
		if ls2.Fence() <= ls.Fence() {
			t.Errorf("trial %d: fence %d after the crash, not above %d", trial, ls2.Fence(), ls.Fence())
		}
		_ = ls2.Release(ctx(t))
		_ = other.Close()
		_ = l.Close()
	}
}

// TestLeaseAbandonedRace reproduces the race that left leases nobody
// holds: an attempt stalled in the server (here behind another
// transaction's uncommitted insert of the same name) whose caller gives
// up, and whose cancel request cannot reach it (the postmaster, which
// relays cancel requests, is frozen). The portable layer releases the
// abandoned token at once, before the stalled grant can commit; the
// grant must then grant nothing. 10 trials of 10.
func TestLeaseAbandonedRace(t *testing.T) {
	srv := testserver.NewPostgres(t)
	admin := newPool(t, srv.URL())
	migrate(t, admin, pglock.Config{})
	pool := newPool(t, srv.URL()+"&pool_max_conns=8")
	warm(t, pool, 8)
	l, err := pglock.Config{}.Locker(pool)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	orphans := 0
	for trial := range 10 {
		name := fmt.Sprintf("race/%d", trial)
		// Each trial's abandoned connection is closed: keep idle ones, so
		// that the release needs no dial while the postmaster is frozen
		// (a release that cannot reach the server cannot undo anything).
		warm(t, pool, 8)
		tx, err := admin.Begin(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx(t), `INSERT INTO dlock_leases (name, token, owner, fence, expires_at)
			VALUES ($1, 'blocker', 'blocker', 0, clock_timestamp() + interval '1 hour')`, name); err != nil {
			t.Fatal(err)
		}
		srv.PausePostmaster()
		time.AfterFunc(600*time.Millisecond, func() { _ = tx.Rollback(context.Background()) })
		c, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		_, err = l.TryAcquire(c, name, dlock.WithTTL(time.Minute))
		cancel()
		time.Sleep(900 * time.Millisecond) // the rollback, then the stalled grant
		srv.ResumePostmaster()
		if err == nil {
			t.Fatalf("trial %d: TryAcquire behind an uncommitted insert succeeded", trial)
		}
		var n int
		if err := admin.QueryRow(ctx(t), `SELECT count(*) FROM dlock_leases WHERE name = $1 AND token IS NOT NULL AND expires_at > clock_timestamp()`, name).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			orphans++
			var tok, owner string
			var dead []string
			_ = admin.QueryRow(ctx(t), `SELECT token, owner, dead FROM dlock_leases WHERE name = $1`, name).Scan(&tok, &owner, &dead)
			t.Logf("trial %d: orphan token %s owner %s dead %v; TryAcquire said %v", trial, tok, owner, dead, err)
		}
	}
	if orphans > 0 {
		t.Errorf("%d of 10 abandoned attempts left a live lease nobody holds", orphans)
	}
}

// TestLeaseAbandonedAttempt: an attempt the server runs after its caller
// gave up (server frozen, deadline passed, server resumed) grants nothing
// in the end, whatever the order in which the stalled grant and the
// abandoning release run: the lock is free right after TryAcquire
// returns, 10 trials of 10.
func TestLeaseAbandonedAttempt(t *testing.T) {
	srv := testserver.NewPostgres(t)
	admin := newPool(t, srv.URL())
	migrate(t, admin, pglock.Config{})
	l, err := pglock.Config{}.Locker(newPool(t, srv.URL()+"&pool_max_conns=8"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	warm(t, admin, 1)
	orphans := 0
	for trial := range 10 {
		name := fmt.Sprintf("abandoned/%d", trial)
		srv.Pause()
		resumed := make(chan struct{})
		time.AfterFunc(time.Duration(400+trial*50)*time.Millisecond, func() { srv.Resume(); close(resumed) })
		c, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		_, err := l.TryAcquire(c, name, dlock.WithTTL(time.Minute))
		cancel()
		<-resumed
		if err == nil {
			t.Fatalf("trial %d: TryAcquire on a frozen server succeeded", trial)
		}
		time.Sleep(300 * time.Millisecond) // let the stalled statement finish
		var n int
		if err := admin.QueryRow(ctx(t), `SELECT count(*) FROM dlock_leases WHERE name = $1 AND token IS NOT NULL AND expires_at > clock_timestamp()`, name).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			orphans++
			t.Errorf("trial %d: the abandoned attempt left a live lease nobody holds", trial)
		}
	}
	t.Logf("%d of 10 abandoned attempts left a lease behind", orphans)
}

// TestUpgrade migrates a database with the per-name fence tables of an
// earlier version: fences continue above every fence ever handed out,
// live leases stay held, the advisory fence table is retired.
func TestUpgrade(t *testing.T) {
	url := testserver.Postgres(t).NewDatabase(t)
	admin := newPool(t, url)
	for _, sql := range []string{
		`CREATE TABLE dlock_fences (name text PRIMARY KEY, owner text NOT NULL DEFAULT '', fence bigint NOT NULL)`,
		`INSERT INTO dlock_fences VALUES ('a', 'old', 1000), ('b', '', 7)`,
		`CREATE TABLE dlock_leases (name text PRIMARY KEY, token text, owner text NOT NULL DEFAULT '', fence bigint NOT NULL, expires_at timestamptz)`,
		`INSERT INTO dlock_leases VALUES ('a', NULL, '', 500, NULL), ('live', 'oldtok', 'old', 600, clock_timestamp() + interval '1 hour')`,
	} {
		if _, err := admin.Exec(ctx(t), sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	for range 2 { // idempotent
		for _, cfg := range modes {
			migrate(t, admin, cfg)
		}
	}
	var old *string
	if err := admin.QueryRow(ctx(t), `SELECT to_regclass('dlock_fences')::text`).Scan(&old); err != nil || old != nil {
		t.Errorf("the old fence table is still there (%v, %v)", old, err)
	}
	adv := newDBLocker(t, url, pglock.Config{Mode: pglock.Advisory})
	ls, err := adv.Acquire(ctx(t), "b")
	if err != nil || ls.Fence() <= 1000 {
		t.Fatalf("advisory grant after the upgrade: fence %v, %v; want > 1000", fenceOf(ls), err)
	}
	_ = ls.Release(ctx(t))
	lease := newDBLocker(t, url, pglock.Config{})
	ls, err = lease.Acquire(ctx(t), "a")
	if err != nil || ls.Fence() <= 600 {
		t.Fatalf("lease grant after the upgrade: fence %v, %v; want > 600", fenceOf(ls), err)
	}
	_ = ls.Release(ctx(t))
	h, ok, err := lease.Inspect(ctx(t), "live")
	if err != nil || !ok || h.Owner != "old" || h.Fence != 600 {
		t.Errorf("the live lease after the upgrade: %+v, held %v, %v; want owner old, fence 600", h, ok, err)
	}
	if _, err := lease.TryAcquire(ctx(t), "live"); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Errorf("TryAcquire of the live lease after the upgrade = %v, want ErrNotAcquired", err)
	}
}

func newDBLocker(t *testing.T, url string, cfg pglock.Config) *dlock.Locker {
	l, err := cfg.Locker(newPool(t, url))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func fenceOf(ls *dlock.Lease) any {
	if ls == nil {
		return nil
	}
	return ls.Fence()
}
