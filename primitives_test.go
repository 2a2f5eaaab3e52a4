package dlock_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	_ "github.com/dlockdev/dlock/memlock"
)

func openMem(t *testing.T) *dlock.Locker {
	t.Helper()
	l, err := dlock.Open(context.Background(), "mem://"+t.Name())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// TestSemaphoreQuick: at most 2 of 6 goroutines inside, and 2 at some point.
func TestSemaphoreQuick(t *testing.T) {
	l := openMem(t)
	sem, err := l.Semaphore("jobs", 2)
	if err != nil {
		t.Fatal(err)
	}
	var inside, most atomic.Int64
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			for range 5 {
				ls, err := sem.Acquire(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				n := inside.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				time.Sleep(2 * time.Millisecond)
				inside.Add(-1)
				if ls.Kind() != dlock.KindPermit || ls.Name() != "jobs" || ls.Slot() < 0 || ls.Slot() > 1 {
					t.Errorf("lease kind %s name %q slot %d", ls.Kind(), ls.Name(), ls.Slot())
				}
				_ = ls.Release(context.Background())
			}
		})
	}
	wg.Wait()
	if most.Load() != 2 {
		t.Fatalf("at most %d inside at once, want exactly 2", most.Load())
	}
	if _, err := l.Acquire(context.Background(), "jobs"); err != nil {
		t.Fatal(err)
	}
	if _, err := sem.TryAcquire(context.Background()); !errors.Is(err, dlock.ErrKindMismatch) {
		t.Fatalf("semaphore over a held mutex: %v, want ErrKindMismatch", err)
	}
}

// TestPrimitiveBadInput: bad names, permit counts and options are
// ErrInvalidArgument errors naming the value, never a panic or a default.
func TestPrimitiveBadInput(t *testing.T) {
	l := openMem(t)
	long := strings.Repeat("n", dlock.MaxNameLen-10) // a fine mutex name, too long for derived keys
	cases := []struct {
		what string
		err  error
		want string
	}{
		{"empty semaphore name", errOf(l.Semaphore("", 2)), "empty"},
		{"control character", errOf(l.Election("a\x1fb")), "printable"},
		{"long RWMutex name", errOf(l.RWMutex(long)), "longer than 480"},
		{"zero permits", errOf(l.Semaphore("s", 0)), "0 permits"},
		{"too many permits", errOf(l.Semaphore("s", dlock.MaxPermits+1)), "1025 permits"},
		{"bad TTL", errOf(l.Semaphore("s", 2, dlock.WithTTL(time.Nanosecond))), "ttl 1ns"},
	}
	for _, c := range cases {
		if !errors.Is(c.err, dlock.ErrInvalidArgument) || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrInvalidArgument mentioning %q", c.what, c.err, c.want)
		}
	}
	if _, err := l.Acquire(context.Background(), long); err != nil {
		t.Errorf("the same long name as a mutex: %v", err)
	}
}

func errOf[T any](_ T, err error) error { return err }
