package fence_test

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/dlockdev/dlock/fence"
)

// TestOnReject: a hook sees each stale write of the Guard under "memory",
// not an accepted one nor an invalid fence; remove stops it (twice is
// harmless) and leaves other hooks in place.
func TestOnReject(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	remove := fence.OnReject(func(store string) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, store)
	})
	var other atomic.Int64
	removeOther := fence.OnReject(func(string) { other.Add(1) })
	defer removeOther()

	var g fence.Guard
	_ = g.Admit("k", 5)
	_ = g.Admit("k", 5)
	_ = g.Admit("k", 0)
	if err := g.Admit("k", 4); !errors.Is(err, fence.ErrStale) {
		t.Fatal(err)
	}
	if err := g.Do("k", 3, func() error { t.Fatal("stale write ran"); return nil }); !errors.Is(err, fence.ErrStale) {
		t.Fatal(err)
	}
	remove()
	remove()
	_ = g.Admit("k", 1)
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(seen) != "[memory memory]" {
		t.Fatalf("hook saw %v, want two memory rejections", seen)
	}
	if other.Load() != 3 {
		t.Fatalf("the other hook saw %d rejections, want 3", other.Load())
	}
}

// TestRejected: only errors matching ErrStale count, wrapped or not, and
// Rejected returns its error unchanged; a nil hook is ignored.
func TestRejected(t *testing.T) {
	defer fence.OnReject(nil)()
	var stores []string
	defer fence.OnReject(func(s string) { stores = append(stores, s) })()
	stale := &fence.StaleError{Key: "k", Offered: 1, Current: 2}
	wrapped := fmt.Errorf("store: %w", stale)
	other := errors.New("disk full")
	for _, err := range []error{nil, other, stale, wrapped} {
		if got := fence.Rejected("mine", err); got != err {
			t.Fatalf("Rejected(%v) returned %v", err, got)
		}
	}
	if fmt.Sprint(stores) != "[mine mine]" {
		t.Fatalf("hook saw %v, want two rejections by mine", stores)
	}
}

// TestOnRejectConcurrent registers, fires and removes hooks from many
// goroutines (run under -race).
func TestOnRejectConcurrent(t *testing.T) {
	var g fence.Guard
	_ = g.Admit("k", 100)
	var wg sync.WaitGroup
	var calls atomic.Int64
	for range 8 {
		wg.Go(func() {
			for range 100 {
				remove := fence.OnReject(func(string) { calls.Add(1) })
				_ = g.Admit("k", 1)
				remove()
			}
		})
	}
	wg.Wait()
	if calls.Load() < 800 {
		t.Fatalf("%d hook calls, want at least one per rejection (800)", calls.Load())
	}
	before := calls.Load()
	_ = g.Admit("k", 1)
	if calls.Load() != before {
		t.Fatal("a removed hook was called")
	}
}
