package memlock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/memlock"
)

func TestOpenSharesNamedStores(t *testing.T) {
	ctx := context.Background()
	a, err := dlock.Open(ctx, "mem://shared-test?owner=a")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := dlock.Open(ctx, "mem://shared-test")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c, err := dlock.Open(ctx, "mem://other-store")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := a.Acquire(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.TryAcquire(ctx, "x"); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Errorf("same NAME: TryAcquire = %v, want ErrNotAcquired", err)
	}
	ls, err := c.TryAcquire(ctx, "x")
	if err != nil {
		t.Errorf("other NAME: TryAcquire = %v, want a separate store", err)
	} else {
		_ = ls.Release(ctx)
	}
}

func TestOpenRejectsBadURLs(t *testing.T) {
	for _, u := range []string{"mem://x?colour=red", "mem://x/some/path"} {
		l, err := dlock.Open(context.Background(), u)
		if err == nil {
			l.Close()
			t.Errorf("Open(%q) succeeded", u)
		} else if !errors.Is(err, dlock.ErrInvalidArgument) {
			t.Errorf("Open(%q) = %v, want ErrInvalidArgument", u, err)
		}
	}
	if _, err := memlock.New(nil); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Errorf("New(nil) = %v, want ErrInvalidArgument", err)
	}
}

func TestStopFailsEveryOperation(t *testing.T) {
	store := memlock.NewStore()
	l := newLocker(t, store)
	defer l.Close()
	ctx := context.Background()
	ls, err := l.Acquire(ctx, "x", dlock.WithTTL(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	store.Stop()
	if _, err := l.TryAcquire(ctx, "y"); !errors.Is(err, dlock.ErrBackend) || !errors.Is(err, memlock.ErrStopped) {
		t.Errorf("TryAcquire on a stopped store = %v, want ErrBackend wrapping ErrStopped", err)
	}
	if err := ls.Refresh(ctx, time.Hour); !errors.Is(err, memlock.ErrStopped) {
		t.Errorf("Refresh = %v, want ErrStopped", err)
	}
	if _, err := l.List(ctx, ""); !errors.Is(err, memlock.ErrStopped) {
		t.Errorf("List = %v, want ErrStopped", err)
	}
}

func TestExpireStealForceRelease(t *testing.T) {
	store := memlock.NewStore()
	l := newLocker(t, store)
	defer l.Close()
	ctx := context.Background()
	if store.Expire("free") {
		t.Error("Expire of a free lock reported it held")
	}
	if f := store.Steal("x", "thief", time.Hour); f != 1 {
		t.Errorf("Steal fence = %d, want 1", f)
	}
	h, ok, err := l.Inspect(ctx, "x")
	if err != nil || !ok || h.Owner != "thief" || h.Fence != 1 || h.TTL <= 59*time.Minute {
		t.Errorf("Inspect = %+v, %v, %v; want the thief, fence 1, ~1h left", h, ok, err)
	}
	_, ok, fence, err := l.ForceRelease(ctx, "x")
	if err != nil || !ok || fence != 2 {
		t.Errorf("ForceRelease = %v, %d, %v; want evicted, fence 2", ok, fence, err)
	}
	if _, ok, fence, _ := l.ForceRelease(ctx, "x"); ok || fence != 3 {
		t.Errorf("ForceRelease of a free lock = %v, %d; want not held, fence still bumped to 3", ok, fence)
	}
	ls, err := l.TryAcquire(ctx, "x")
	if err != nil || ls.Fence() != 4 {
		t.Fatalf("TryAcquire after force-releases: %v, want fence 4", err)
	}
	_ = ls.Release(ctx)
}

func TestListSortedByPrefix(t *testing.T) {
	store := memlock.NewStore()
	l := newLocker(t, store)
	defer l.Close()
	ctx := context.Background()
	for _, n := range []string{"jobs/b", "jobs/a", "other"} {
		if _, err := l.TryAcquire(ctx, n, dlock.WithOwner("me")); err != nil {
			t.Fatal(err)
		}
	}
	hs, err := l.List(ctx, "jobs/")
	if err != nil || len(hs) != 2 || hs[0].Name != "jobs/a" || hs[1].Name != "jobs/b" {
		t.Errorf("List(jobs/) = %+v, %v; want jobs/a, jobs/b", hs, err)
	}
	all, _ := l.List(ctx, "")
	if len(all) != 3 {
		t.Errorf("List(\"\") = %d holders, want 3", len(all))
	}
}

// TestConfigDriver: the bare driver from Config.Driver works under a
// Locker the caller assembles, on the Store it was given.
func TestConfigDriver(t *testing.T) {
	ctx := context.Background()
	store := memlock.NewStore()
	d, err := memlock.Config{}.Driver(store)
	if err != nil {
		t.Fatal(err)
	}
	l, err := dlock.NewLocker(d)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.TryAcquire(ctx, "bare"); err != nil {
		t.Fatal(err)
	}
	other := newLocker(t, store)
	defer other.Close()
	if _, err := other.TryAcquire(ctx, "bare"); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Errorf("TryAcquire on the same Store = %v, want ErrNotAcquired", err)
	}
	if _, err := (memlock.Config{}).Driver(nil); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Errorf("Driver(nil) = %v, want ErrInvalidArgument", err)
	}
}

// TestEvictionPushesAreNotDropped: a subscriber that reads nothing while
// 100 locks are force-released still gets all 100 evictions afterwards,
// in order (a bounded channel used to drop the news past 16, and those
// holders learned at their next refresh instead).
func TestEvictionPushesAreNotDropped(t *testing.T) {
	ctx := context.Background()
	holder, admin := holderAndAdmin(t)
	ew := admin.Driver().(driver.EvictionWatcher)
	ch, stop, err := ew.WatchEvictions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	const n = 100
	fences := make([]uint64, n)
	for i := range n {
		ls, err := holder.Acquire(ctx, fmt.Sprintf("burst-%d", i), dlock.WithTTL(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		fences[i] = ls.Fence()
	}
	for i := range n {
		if _, ok, _, err := admin.ForceRelease(ctx, fmt.Sprintf("burst-%d", i)); err != nil || !ok {
			t.Fatalf("ForceRelease %d: ok %v, %v", i, ok, err)
		}
	}
	for i := range n {
		select {
		case e := <-ch:
			if want := (driver.Eviction{Name: fmt.Sprintf("burst-%d", i), Fence: fences[i]}); e != want {
				t.Fatalf("eviction %d = %+v, want %+v", i, e, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%d of %d evictions arrived", i, n)
		}
	}
}

// TestEvictionBeforeTheWatchIsTold: a Locker subscribes to evictions in
// the background once it holds a lease; a force-release in between is
// told to the subscription when it comes, so the lease ends at once as
// force-released instead of at its next refresh as a loss of another
// kind.
func TestEvictionBeforeTheWatchIsTold(t *testing.T) {
	ctx := context.Background()
	holder, admin := holderAndAdmin(t)
	ls, err := holder.Acquire(ctx, "early", dlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, _, err := admin.ForceRelease(ctx, "early"); err != nil || !ok {
		t.Fatalf("ForceRelease: ok %v, %v", ok, err)
	}
	ch, stop, err := admin.Driver().(driver.EvictionWatcher).WatchEvictions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	select {
	case e := <-ch:
		if want := (driver.Eviction{Name: "early", Fence: ls.Fence()}); e != want {
			t.Fatalf("eviction = %+v, want %+v", e, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a watch that began after the force-release was not told of it")
	}
	select {
	case <-ls.Done():
		var lost *dlock.LostError
		if err := ls.Err(); !errors.As(err, &lost) || lost.Reason != dlock.LostForceReleased {
			t.Errorf("the lease ended with %v, want lost as force-released", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the force-released lease was not told within 5 s (its refresh is due in 20 s)")
	}
}

// holderAndAdmin returns two Lockers on one new Store, closed when t ends.
func holderAndAdmin(t *testing.T) (holder, admin *dlock.Locker) {
	t.Helper()
	store := memlock.NewStore()
	for _, l := range []**dlock.Locker{&holder, &admin} {
		var err error
		if *l, err = memlock.New(store); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = (*l).Close() })
	}
	return holder, admin
}
