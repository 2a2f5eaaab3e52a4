package gocronlock_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	_ "github.com/dlockdev/dlock/filelock"
	"go.uber.org/goleak"
)

// TestMain fails the run if a test leaks a goroutine (a campaign, a
// scheduler's, a Locker's watchdog).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fileURL is a new embedded backend (SQLite, with a run ledger) in a
// temporary directory.
func fileURL(t *testing.T) string {
	return "file://" + filepath.Join(t.TempDir(), "dlock.db")
}

// openHost opens a dlock Locker on url for one "host", closed when the
// test ends.
func openHost(t *testing.T, url, owner string) *dlock.Locker {
	t.Helper()
	dl, err := dlock.Open(context.Background(), url, dlock.WithOwner(owner))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dl.Close() })
	return dl
}

// eventually polls cond until it holds; the bound is far beyond anything
// the condition needs, to fail a stuck test rather than to time it.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after 30s: still not %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
