package filelock_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/filelock"
)

func TestBadURLs(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ url, names string }{
		{"file://relative/dlock.db", "file://relative/dlock.db"},
		{"file:relative.db", "file:relative.db"},
		{"file://", `""`},
		{"file:///", `"/"`},
		{"file://" + dir + "/", dir + "/"},
		{"file://" + dir + "/x.db?busy=1s", `"busy"`},
		{"file://" + dir + "/x.db?sync=sometimes", `"sometimes"`},
		{"file://" + dir + "/x.db?retention=soon", `"soon"`},
		{"file://" + dir + "/x.db?retention=-1h", `retention="-1h"`},
		{"file://" + dir + "/x.db?retention=0s", `retention="0s"`},
		{"file://" + dir + "/x.db?sync=full;", "';'"},
		{"file://otherhost/x.db", "otherhost"},
	} {
		l, err := dlock.Open(context.Background(), tc.url)
		if err == nil {
			l.Close()
			t.Errorf("Open(%q) succeeded, want an error", tc.url)
			continue
		}
		if !errors.Is(err, dlock.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.names) {
			t.Errorf("Open(%q) = %v, want ErrInvalidArgument naming %s", tc.url, err, tc.names)
		}
	}
}

func TestNewBadPaths(t *testing.T) {
	for _, p := range []string{"", "relative/dlock.db", "./x.db", "/tmp/dir/"} {
		l, err := filelock.New(p)
		if err == nil {
			l.Close()
			t.Errorf("New(%q) succeeded, want an error", p)
			continue
		}
		if !errors.Is(err, dlock.ErrInvalidArgument) || !strings.Contains(err.Error(), `"`+p+`"`) {
			t.Errorf("New(%q) = %v, want ErrInvalidArgument naming it", p, err)
		}
	}
	if _, err := filelock.NewDB(nil); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Errorf("New(nil) = %v, want ErrInvalidArgument", err)
	}
}

func TestGoodURLs(t *testing.T) {
	dir := t.TempDir()
	for _, u := range []string{
		"file://" + dir + "/a.db",
		"file://localhost" + dir + "/b.db",
		"file://" + dir + "/c.db?sync=full&ttl=5s&owner=me",
		"file://" + dir + "/d.db?retention=10m",
		"file://" + dir + "/with%20space%3F.db",
	} {
		l, err := dlock.Open(context.Background(), u)
		if err != nil {
			t.Errorf("Open(%q): %v", u, err)
			continue
		}
		ls, err := l.TryAcquire(context.Background(), "x")
		if err != nil {
			t.Errorf("%s: TryAcquire: %v", u, err)
		} else if err := ls.Release(context.Background()); err != nil {
			t.Errorf("%s: Release: %v", u, err)
		}
		l.Close()
	}
	if _, err := os.Stat(filepath.Join(dir, "with space?.db")); err != nil {
		t.Errorf("escaped path not decoded: %v", err)
	}
}

// TestDefaultPath: dlock.Open(ctx, "") with no DLOCK_URL opens the file
// under $XDG_STATE_HOME, creating its directory private to the user.
func TestDefaultPath(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	t.Setenv("XDG_STATE_HOME", state)
	t.Setenv(dlock.EnvURL, "")
	l, err := dlock.Open(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ls, err := l.TryAcquire(context.Background(), "default")
	if err != nil {
		t.Fatal(err)
	}
	defer ls.Release(context.Background())
	st, err := os.Stat(filepath.Join(state, "dlock"))
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("default directory: %v, mode %v; want 0700", err, st.Mode().Perm())
	}
	if _, err := os.Stat(filepath.Join(state, "dlock", "dlock.db")); err != nil {
		t.Fatalf("default database file: %v", err)
	}
}
