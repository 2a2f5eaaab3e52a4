package filelock_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/filelock"
)

func dbPath(t testing.TB) string {
	return filepath.Join(t.TempDir(), "locks", "dlock.db")
}

func open(t testing.TB, path string, opts ...dlock.Option) *dlock.Locker {
	t.Helper()
	l, err := filelock.New(path, opts...)
	if err != nil {
		t.Fatalf("New(%q): %v", path, err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func TestAcquireHeldReleaseFence(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	a, b := open(t, path), open(t, path)
	la, err := a.TryAcquire(ctx, "job", dlock.WithOwner("alice"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.TryAcquire(ctx, "job")
	var held *dlock.HeldError
	if !errors.As(err, &held) || held.Owner != "alice" || held.Fence != la.Fence() || held.TTL <= 0 {
		t.Fatalf("second TryAcquire = %v (%+v), want HeldError naming alice, fence %d", err, held, la.Fence())
	}
	if err := la.Release(ctx); err != nil {
		t.Fatal(err)
	}
	lb, err := b.TryAcquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Release(ctx)
	if lb.Fence() <= la.Fence() {
		t.Fatalf("fence after release %d, want > %d", lb.Fence(), la.Fence())
	}
}

func TestWaiterWokenByRelease(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	a, b := open(t, path), open(t, path)
	la, err := a.TryAcquire(ctx, "w", dlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		lb, err := b.Acquire(ctx, "w", dlock.WithWait(time.Minute))
		if err == nil {
			err = lb.Release(ctx)
		}
		got <- err
	}()
	time.Sleep(50 * time.Millisecond)
	if err := la.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("waiter not granted within 20s of the release")
	}
}

// TestNewDBWithCallersDB: NewDB uses the caller's *sql.DB and leaves it open.
func TestNewDBWithCallersDB(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "mine.db")
	db, err := sql.Open("sqlite", "file://"+path+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	a, err := filelock.NewDB(db)
	if err != nil {
		t.Fatal(err)
	}
	ls, err := a.TryAcquire(ctx, "n")
	if err != nil {
		t.Fatal(err)
	}
	b, err := filelock.NewDB(db)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	done := make(chan error, 1)
	go func() {
		lb, err := b.Acquire(ctx, "n", dlock.WithWait(time.Minute))
		if err == nil {
			err = lb.Release(ctx)
		}
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	if err := ls.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.PingContext(ctx); err != nil {
		t.Fatalf("caller's db closed by Locker.Close: %v", err)
	}
}

// TestConfigInvalid: a bad Sync or Retention, or a Sync given with a caller's database
// (whose DSN decides), is an ErrInvalidArgument naming the value.
func TestConfigInvalid(t *testing.T) {
	path := dbPath(t)
	_, err := filelock.Config{Sync: "sometimes"}.Locker(path)
	if !errors.Is(err, dlock.ErrInvalidArgument) || !strings.Contains(err.Error(), `"sometimes"`) {
		t.Errorf(`Config{Sync: "sometimes"}.Locker = %v, want ErrInvalidArgument naming "sometimes"`, err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, err = filelock.Config{Sync: filelock.SyncFull}.DBLocker(db)
	if !errors.Is(err, dlock.ErrInvalidArgument) || !strings.Contains(err.Error(), `"full"`) {
		t.Errorf("Config{Sync: full}.DBLocker = %v, want ErrInvalidArgument naming \"full\"", err)
	}
	_, err = filelock.Config{Retention: -time.Minute}.Locker(path)
	if !errors.Is(err, dlock.ErrInvalidArgument) || !strings.Contains(err.Error(), "-1m0s") {
		t.Errorf("Config{Retention: -1m}.Locker = %v, want ErrInvalidArgument naming -1m0s", err)
	}
	if _, err := filelock.New(path, dlock.WithTTL(-time.Second)); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Errorf("New with a negative TTL = %v, want ErrInvalidArgument", err)
	}
}

// TestConfigDriver: the bare driver from Config.Driver works under a
// Locker the caller assembles, with Sync full.
func TestConfigDriver(t *testing.T) {
	d, err := filelock.Config{Sync: filelock.SyncFull}.Driver(dbPath(t))
	if err != nil {
		t.Fatal(err)
	}
	l, err := dlock.NewLocker(d)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ls, err := l.TryAcquire(context.Background(), "bare")
	if err != nil {
		t.Fatal(err)
	}
	if err := ls.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
}
