package dlock_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/filelock"
	"github.com/dlockdev/dlock/memlock"
)

// TestForceReleaseEndsOwnLease: a force-release through the Locker that
// holds the lease ends that lease before ForceRelease returns, with
// LostForceReleased: on the file backend, which pushes no eviction (its
// holder would otherwise learn at the next refresh, a third of the TTL
// later), and on memlock right after the first grant, while the Locker's
// eviction subscription may still be starting. A semaphore's permit too.
func TestForceReleaseEndsOwnLease(t *testing.T) {
	ctx := context.Background()
	fl, err := filelock.New(filepath.Join(t.TempDir(), "locks.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fl.Close() })
	for _, tc := range []struct {
		name string
		l    *dlock.Locker
	}{{"file", fl}, {"mem", newMemLocker(t)}} {
		t.Run(tc.name, func(t *testing.T) {
			ls, err := tc.l.Acquire(ctx, "wedged", dlock.WithTTL(30*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			if _, ok, _, err := tc.l.ForceRelease(ctx, "wedged"); err != nil || !ok {
				t.Fatalf("ForceRelease: ok %v, %v", ok, err)
			}
			lostNow(t, ls)

			sem, err := tc.l.Semaphore("pool", 2)
			if err != nil {
				t.Fatal(err)
			}
			p, err := sem.Acquire(ctx, dlock.WithTTL(30*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			if _, ok, _, err := sem.ForceRelease(ctx, p.Slot()); err != nil || !ok {
				t.Fatalf("Semaphore.ForceRelease: ok %v, %v", ok, err)
			}
			lostNow(t, p)
		})
	}
}

// lostNow fails unless ls has already ended, force-released.
func lostNow(t *testing.T, ls *dlock.Lease) {
	t.Helper()
	select {
	case <-ls.Done():
	default:
		t.Fatalf("%s: the lease is still live when ForceRelease returns", ls.Name())
	}
	var lost *dlock.LostError
	if !errors.As(ls.Err(), &lost) || lost.Reason != dlock.LostForceReleased {
		t.Fatalf("%s: Err() = %v, want a LostError with reason %q", ls.Name(), ls.Err(), dlock.LostForceReleased)
	}
}

func newMemLocker(t *testing.T) *dlock.Locker {
	t.Helper()
	l, err := memlock.New(memlock.NewStore())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// TestOptionalAbilities: Diagnose and MigrateReport say ErrUnsupported on
// a backend without deployment checks or schema (memlock), and Diagnose
// runs the checks of one that has them (the file backend).
func TestOptionalAbilities(t *testing.T) {
	ctx := context.Background()
	mem, err := memlock.New(memlock.NewStore())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mem.Close() })
	if _, err := mem.Diagnose(ctx); !errors.Is(err, dlock.ErrUnsupported) {
		t.Errorf("memlock Diagnose = %v, want ErrUnsupported", err)
	}
	if _, err := mem.MigrateReport(ctx); !errors.Is(err, dlock.ErrUnsupported) {
		t.Errorf("memlock MigrateReport = %v, want ErrUnsupported", err)
	}
	file, err := filelock.New(filepath.Join(t.TempDir(), "locks.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = file.Close() })
	fs, err := file.Diagnose(ctx)
	if err != nil || len(fs) == 0 {
		t.Errorf("file Diagnose = %d findings, %v; want its checks", len(fs), err)
	}
	if err := file.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := file.Diagnose(ctx); err == nil {
		t.Error("Diagnose on a closed Locker succeeded")
	}
}
