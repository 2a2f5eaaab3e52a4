package memlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/memlock"
)

// validName is the documented rule for lock names: 1 to dlock.MaxNameLen
// bytes of valid UTF-8 without control characters, line or paragraph
// separators, or bidirectional formatting characters.
func validName(s string) bool {
	hidden := func(r rune) bool {
		return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) || unicode.In(r, unicode.Zl, unicode.Zp)
	}
	return s != "" && len(s) <= dlock.MaxNameLen && utf8.ValidString(s) && strings.IndexFunc(s, hidden) < 0
}

// FuzzName takes, inspects, lists and releases a lock under a fuzzed name
// on the in-memory driver. A name is accepted exactly when the documented
// rule says so; a refused name is an ErrInvalidArgument; an accepted one
// reads back unchanged through Inspect and List.
func FuzzName(f *testing.F) {
	for _, s := range []string{"a", "billing/run", "", "x\x00y", "tab\there", "\xff\xfe", "日本語/ロック",
		strings.Repeat("n", dlock.MaxNameLen), strings.Repeat("n", dlock.MaxNameLen+1), "{tag}:x", "%7D", "a\u2028b", "job\u202egnp.exe", "a\u2066b\u2069"} {
		f.Add(s)
	}
	l, err := memlock.New(memlock.NewStore())
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = l.Close() })
	f.Fuzz(func(t *testing.T, name string) {
		ctx := context.Background()
		ls, err := l.TryAcquire(ctx, name)
		if !validName(name) {
			if err == nil {
				_ = ls.Release(ctx)
				t.Fatalf("TryAcquire(%q) accepted a name the rule refuses", name)
			}
			if !errors.Is(err, dlock.ErrInvalidArgument) {
				t.Fatalf("TryAcquire(%q): %v, want ErrInvalidArgument", name, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("TryAcquire(%q) refused a valid name: %v", name, err)
		}
		defer ls.Release(ctx)
		h, ok, err := l.Inspect(ctx, name)
		if err != nil || !ok || h.Name != name || h.Fence != ls.Fence() {
			t.Fatalf("Inspect(%q) = %+v, %v, %v; want the holder with fence %d", name, h, ok, err, ls.Fence())
		}
		hs, err := l.List(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, h := range hs {
			found = found || h.Name == name
		}
		if !found {
			t.Fatalf("List(%q) = %+v lacks the held name", name, hs)
		}
		if err := ls.Release(ctx); err != nil {
			t.Fatalf("Release(%q): %v", name, err)
		}
	})
}
