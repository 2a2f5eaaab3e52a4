package redisfence_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/fence/redisfence"
)

// hashTag is what Redis Cluster hashes for key: the bytes between the
// first '{' and the first '}' after it, when there is at least one;
// otherwise the whole key.
func hashTag(key string) string {
	open := strings.IndexByte(key, '{')
	if open < 0 {
		return key
	}
	end := strings.IndexByte(key[open+1:], '}')
	if end <= 0 {
		return key
	}
	return key[open+1 : open+1+end]
}

// FuzzFenceKey: a fence key that FenceKey returns must land in the same
// Redis Cluster hash slot as its key (same hash tag, by Redis's own
// rule), and differ from it; a refused key is an ErrInvalidArgument.
func FuzzFenceKey(f *testing.F) {
	for _, s := range []string{"acct:1", "{acct:1}:balance", "{}", "}{", "a}b", "{a", "{{a}}", "x{}y{z}", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		fk, err := redisfence.FenceKey(key)
		if err != nil {
			if !errors.Is(err, dlock.ErrInvalidArgument) {
				t.Fatalf("FenceKey(%q): %v, want ErrInvalidArgument", key, err)
			}
			return
		}
		if fk == key {
			t.Fatalf("FenceKey(%q) = the key itself", key)
		}
		if hashTag(fk) != hashTag(key) {
			t.Fatalf("FenceKey(%q) = %q hashes on %q, the key on %q: different slots in a Cluster", key, fk, hashTag(fk), hashTag(key))
		}
	})
}
