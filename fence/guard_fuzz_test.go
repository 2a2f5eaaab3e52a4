package fence_test

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/fence"
)

// FuzzGuard offers a fuzzed sequence of fences (8 bytes each, big endian;
// the low bit of the first byte picks one of two keys) to a Guard and to a
// model of the rule: a write is admitted exactly when its fence is not
// zero and not below the highest admitted for its key.
func FuzzGuard(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 4})
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1, 0, 0, 0, 0, 0, 0, 7})
	f.Fuzz(func(t *testing.T, data []byte) {
		var g fence.Guard
		highest := map[string]uint64{}
		for len(data) >= 8 {
			v := binary.BigEndian.Uint64(data)
			data = data[8:]
			key := []string{"a", "b"}[v>>63]
			err := g.Admit(key, v)
			switch {
			case v == 0:
				if !errors.Is(err, dlock.ErrInvalidArgument) {
					t.Fatalf("Admit(%s, 0) = %v, want ErrInvalidArgument", key, err)
				}
			case v < highest[key]:
				var se *fence.StaleError
				if !errors.As(err, &se) || se.Offered != v || se.Current != highest[key] || !errors.Is(err, fence.ErrStale) {
					t.Fatalf("Admit(%s, %d) after %d = %v, want a StaleError", key, v, highest[key], err)
				}
			default:
				if err != nil {
					t.Fatalf("Admit(%s, %d) after %d = %v, want nil", key, v, highest[key], err)
				}
				highest[key] = v
			}
			if g.Current(key) != highest[key] {
				t.Fatalf("Current(%s) = %d, want %d", key, g.Current(key), highest[key])
			}
		}
	})
}
