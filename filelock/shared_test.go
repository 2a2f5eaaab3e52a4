package filelock

import (
	"context"
	"path/filepath"
	"testing"
)

// TestStoreShared: drivers on one file in one process share one store,
// which closes with the last of them.
func TestStoreShared(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.db")
	a, err := openDriver(ctx, path, Config{Sync: SyncNormal, Retention: DefaultRetention})
	if err != nil {
		t.Fatal(err)
	}
	b, err := openDriver(ctx, filepath.Join(filepath.Dir(path), ".", "s.db"), Config{Sync: SyncNormal, Retention: DefaultRetention})
	if err != nil {
		t.Fatal(err)
	}
	if a.store != b.store {
		t.Fatal("two drivers on one file got different stores")
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil { // idempotent, and must not drop b's reference
		t.Fatal(err)
	}
	if err := b.Release(ctx, "x", "y"); err == nil || b.db.PingContext(ctx) != nil {
		t.Fatalf("b unusable after a closed: %v", b.db.PingContext(ctx))
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	shared.mu.Lock()
	n := len(shared.m)
	shared.mu.Unlock()
	if n != 0 || b.db.PingContext(ctx) == nil {
		t.Fatalf("store still open after its last driver closed (%d stores)", n)
	}
}
