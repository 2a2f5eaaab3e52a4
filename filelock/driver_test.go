package filelock

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/dlockdev/dlock/driver"
)

func testDriver(t *testing.T) (*fileDriver, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "d.db")
	d, err := openDriver(context.Background(), path, Config{Sync: SyncNormal, Retention: DefaultRetention})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d, path
}

func grant(t *testing.T, d *fileDriver, name, token string, ttl time.Duration) driver.Grant {
	t.Helper()
	g, err := d.TryAcquire(context.Background(), driver.Request{Name: name, Token: token, Owner: "o-" + token, TTL: ttl})
	if err != nil {
		t.Fatalf("TryAcquire(%s, %s): %v", name, token, err)
	}
	return g
}

// TestLostReplyRecovery: a repeated attempt by the holding token is a
// grant with the same fence, not a new one.
func TestLostReplyRecovery(t *testing.T) {
	d, _ := testDriver(t)
	g1 := grant(t, d, "n", "a", time.Minute)
	g2 := grant(t, d, "n", "a", time.Minute)
	if !g1.Acquired || !g2.Acquired || g1.Fence != g2.Fence {
		t.Fatalf("grants %+v then %+v: want both acquired with one fence", g1, g2)
	}
	g3 := grant(t, d, "n", "b", time.Minute)
	if g3.Acquired || g3.Holder.Owner != "o-a" || g3.Holder.Fence != g1.Fence || g3.Holder.TTL <= 50*time.Second {
		t.Fatalf("other token got %+v, want the holder o-a, fence %d, ~1m left", g3, g1.Fence)
	}
}

// TestNeverRevived: Refresh and Release of a lease that is gone never
// bring it back, and say whether it expired or was taken over.
func TestNeverRevived(t *testing.T) {
	ctx := context.Background()
	d, _ := testDriver(t)
	grant(t, d, "n", "a", 20*time.Millisecond)
	time.Sleep(40 * time.Millisecond)
	if err := d.Refresh(ctx, "n", "a", time.Minute); !errors.Is(err, driver.ErrExpired) {
		t.Fatalf("Refresh after expiry = %v, want ErrExpired", err)
	}
	if err := d.Release(ctx, "n", "a"); !errors.Is(err, driver.ErrExpired) {
		t.Fatalf("Release after expiry = %v, want ErrExpired", err)
	}
	g := grant(t, d, "n", "b", time.Minute)
	if !g.Acquired || g.Fence != 2 {
		t.Fatalf("after expiry: %+v, want acquired with fence 2", g)
	}
	if err := d.Refresh(ctx, "n", "a", time.Minute); !errors.Is(err, driver.ErrTakenOver) {
		t.Fatalf("Refresh by old token = %v, want ErrTakenOver", err)
	}
	if err := d.Release(ctx, "n", "a"); !errors.Is(err, driver.ErrTakenOver) {
		t.Fatalf("Release by old token = %v, want ErrTakenOver", err)
	}
	if err := d.Release(ctx, "n", "b"); err != nil {
		t.Fatal(err)
	}
	if err := d.Refresh(ctx, "n", "b", time.Minute); !errors.Is(err, driver.ErrExpired) {
		t.Fatalf("Refresh after release = %v, want ErrExpired", err)
	}
	if err := d.Release(ctx, "never", "x"); !errors.Is(err, driver.ErrExpired) {
		t.Fatalf("Release of a never-locked name = %v, want ErrExpired", err)
	}
	if _, ok, _ := d.Inspect(ctx, "n"); ok {
		t.Fatal("Inspect after release: held, want free")
	}
}

func TestRefreshBatch(t *testing.T) {
	ctx := context.Background()
	d, _ := testDriver(t)
	grant(t, d, "live", "a", time.Minute)
	grant(t, d, "gone", "a", 20*time.Millisecond)
	grant(t, d, "taken", "b", time.Minute)
	time.Sleep(40 * time.Millisecond)
	res, err := d.RefreshBatch(ctx, []driver.RefreshItem{
		{Name: "live", Token: "a", TTL: 2 * time.Minute},
		{Name: "gone", Token: "a", TTL: time.Minute},
		{Name: "taken", Token: "a", TTL: time.Minute},
		{Name: "missing", Token: "a", TTL: time.Minute},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []error{nil, driver.ErrExpired, driver.ErrTakenOver, driver.ErrExpired}
	for i := range want {
		if !errors.Is(res[i], want[i]) || (want[i] == nil) != (res[i] == nil) {
			t.Errorf("item %d: %v, want %v", i, res[i], want[i])
		}
	}
	h, ok, err := d.Inspect(ctx, "live")
	if err != nil || !ok || h.TTL <= 90*time.Second {
		t.Fatalf("Inspect(live) = %+v, %v, %v; want extended to ~2m", h, ok, err)
	}
}

// TestForceReleaseBumpsFence: a force-release raises the fence, even of a
// name never locked, and the next holder's fence is above it.
func TestForceReleaseBumpsFence(t *testing.T) {
	ctx := context.Background()
	d, _ := testDriver(t)
	g := grant(t, d, "n", "a", time.Minute)
	ev, ok, fence, err := d.ForceRelease(ctx, "n")
	if err != nil || !ok || ev.Owner != "o-a" || ev.Fence != g.Fence || fence <= g.Fence {
		t.Fatalf("ForceRelease = %+v, %v, %d, %v; want o-a evicted, fence above %d", ev, ok, fence, err, g.Fence)
	}
	if err := d.Refresh(ctx, "n", "a", time.Minute); !errors.Is(err, driver.ErrExpired) {
		t.Fatalf("Refresh after force-release = %v, want ErrExpired", err)
	}
	if g2 := grant(t, d, "n", "b", time.Minute); g2.Fence <= fence {
		t.Fatalf("next fence %d, want above %d", g2.Fence, fence)
	}
	_, ok, fence, err = d.ForceRelease(ctx, "fresh")
	if err != nil || ok || fence != 1 {
		t.Fatalf("ForceRelease(fresh) = %v, %d, %v; want not held, fence 1", ok, fence, err)
	}
	if g3 := grant(t, d, "fresh", "c", time.Minute); g3.Fence != 2 {
		t.Fatalf("fence after force-release of a fresh name: %d, want 2", g3.Fence)
	}
}

// TestFencesSurviveReopen: the fence lives in the file, not the process.
func TestFencesSurviveReopen(t *testing.T) {
	ctx := context.Background()
	d, path := testDriver(t)
	g := grant(t, d, "n", "a", time.Minute)
	if err := d.Release(ctx, "n", "a"); err != nil {
		t.Fatal(err)
	}
	d2, err := openDriver(ctx, path, Config{Sync: SyncFull, Retention: DefaultRetention})
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Close()
	if g2 := grant(t, d2, "n", "b", time.Minute); g2.Fence != g.Fence+1 {
		t.Fatalf("fence after reopen %d, want %d", g2.Fence, g.Fence+1)
	}
}

func TestListPrefix(t *testing.T) {
	ctx := context.Background()
	d, _ := testDriver(t)
	for _, n := range []string{"a/1", "a/2", "a%", "a_", "ab", "b/1", "é/1"} {
		grant(t, d, n, "t", time.Minute)
	}
	grant(t, d, "a/expired", "t", 10*time.Millisecond)
	time.Sleep(30 * time.Millisecond)
	for prefix, want := range map[string]int{"": 7, "a": 5, "a/": 2, "a%": 1, "b/": 1, "é": 1, "z": 0} {
		hs, err := d.List(ctx, prefix)
		if err != nil || len(hs) != want {
			t.Errorf("List(%q) = %d holders, %v; want %d", prefix, len(hs), err, want)
		}
	}
}
