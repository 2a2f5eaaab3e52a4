package filelock_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/filelock"
)

// callersLocker opens path on a *sql.DB of its own: a store shared with
// no other Locker, as in another process.
func callersLocker(t *testing.T, path string) *dlock.Locker {
	t.Helper()
	db, err := sql.Open("sqlite", "file://"+path+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(wal)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	l, err := filelock.NewDB(db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// TestEvictionPushedToAnotherStore: a force-release made through another
// store (another process, in effect) ends the holder's lease as
// force-released, not at its next refresh (10 s away with a 30 s TTL,
// which would report the lease expired). The force-release comes right
// after the grant, before the holder's Locker has subscribed (it does in
// the background): it is delivered all the same.
func TestEvictionPushedToAnotherStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "evictions.db")
	holder, admin := callersLocker(t, path), callersLocker(t, path)
	ctx := context.Background()
	ls, err := holder.Acquire(ctx, "evicted", dlock.WithTTL(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer ls.Release(ctx)
	evicted, ok, fence, err := admin.ForceRelease(ctx, "evicted")
	if err != nil || !ok || evicted.Fence != ls.Fence() {
		t.Fatalf("ForceRelease = %+v, %v, %d, %v; want the holder (fence %d) evicted", evicted, ok, fence, err, ls.Fence())
	}
	start := time.Now()
	select {
	case <-ls.Done():
	case <-time.After(9 * time.Second): // before the first refresh, at 10 s
		t.Fatal("the holder's lease still live 9 s after the force-release: not told")
	}
	t.Logf("force-release → lease ended in %v", time.Since(start).Round(time.Millisecond))
	var le *dlock.LostError
	if !errors.As(ls.Err(), &le) || le.Reason != dlock.LostForceReleased {
		t.Errorf("lease Err = %v, want a LostError saying %q", ls.Err(), dlock.LostForceReleased)
	}
}

// TestEvictionRecordsPruned: a force-release deletes the eviction records
// older than ten minutes, so the table holds only recent ones.
func TestEvictionRecordsPruned(t *testing.T) {
	path := dbPath(t)
	l := open(t, path)
	ctx := context.Background()
	for _, name := range []string{"old", "new"} {
		ls, err := l.Acquire(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok, _, err := l.ForceRelease(ctx, name); err != nil || !ok {
			t.Fatalf("ForceRelease(%s) = %v, %v", name, ok, err)
		}
		_ = ls.Release(ctx)
		if name == "old" {
			sqlExec(t, path, `UPDATE dlock_evictions SET at = at - 11*60*1000 WHERE name = ?1`, "old")
		}
	}
	db, err := sql.Open("sqlite", "file://"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var names string
	if err := db.QueryRow(`SELECT group_concat(name) FROM dlock_evictions`).Scan(&names); err != nil {
		t.Fatal(err)
	}
	if names != "new" {
		t.Errorf("eviction records %q, want only the recent one (new)", names)
	}
}
