package filelock

import (
	"context"
	"testing"
	"time"
)

func signalled(ch <-chan struct{}, within time.Duration) bool {
	select {
	case <-ch:
		return true
	case <-time.After(within):
		return false
	}
}

// TestWatchWakesOldestWaiter: each release wakes one watcher of its name,
// the longest-waiting, whether the release was made by this driver or by
// another connection (found by polling).
func TestWatchWakesOldestWaiter(t *testing.T) {
	ctx := context.Background()
	d, path := testDriver(t)
	other, err := privateDriver(path, SyncNormal) // as another process would have
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	first, stop1, err := d.Watch(ctx, "n")
	if err != nil {
		t.Fatal(err)
	}
	second, stop2, err := d.Watch(ctx, "n")
	if err != nil {
		t.Fatal(err)
	}
	defer stop2()
	unrelated, stop3, _ := d.Watch(ctx, "other")
	defer stop3()

	grant(t, other, "n", "a", time.Minute)
	if err := other.Release(ctx, "n", "a"); err != nil {
		t.Fatal(err)
	}
	if !signalled(first, 10*time.Second) || signalled(second, 50*time.Millisecond) {
		t.Fatal("another connection's release: want the first watcher woken, and only it")
	}
	stop1()
	grant(t, d, "n", "b", time.Minute)
	if err := d.Release(ctx, "n", "b"); err != nil {
		t.Fatal(err)
	}
	if !signalled(second, 10*time.Second) {
		t.Fatal("own release: the remaining watcher was not woken")
	}
	if signalled(second, 50*time.Millisecond) || signalled(unrelated, 0) {
		t.Fatal("one release signalled twice, or woke another name's watcher")
	}
}

// TestWatcherStops: the poller runs only while someone watches, and Watch
// after Close fails instead of starting it again.
func TestWatcherStops(t *testing.T) {
	ctx := context.Background()
	d, _ := testDriver(t)
	_, stop, err := d.Watch(ctx, "n")
	if err != nil {
		t.Fatal(err)
	}
	stop()
	stop() // idempotent
	d.watch.mu.Lock()
	running := d.watch.running
	d.watch.mu.Unlock()
	if running {
		t.Fatal("poller still running after the last watcher stopped")
	}
	if _, _, err := d.Watch(ctx, "n"); err != nil {
		t.Fatalf("Watch again: %v", err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.Watch(ctx, "n"); err == nil {
		t.Fatal("Watch after Close succeeded")
	}
}
