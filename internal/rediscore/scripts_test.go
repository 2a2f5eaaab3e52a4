package rediscore_test

import (
	"testing"
	"time"

	"github.com/dlockdev/dlock/internal/rediscore"
	"github.com/redis/go-redis/v9"
)

// TestRefreshMarks: the one refresh script serves both drivers' values,
// "token\nfence\nowner" and Redlock's "token/attempt\nfence\nowner",
// through the mark each passes; it extends only its holder's lock, never
// one whose token merely starts like it, never re-creates a missing one,
// and leaves the value as it was. RefreshBatch answers the same, lock by
// lock.
func TestRefreshMarks(t *testing.T) {
	_, c := server(t)
	ctx := t.Context()
	values := map[string]string{"single": "tok\n5\nowner", "redlock": "tok/3\n7\nowner"}
	cases := []struct {
		key, mark string
		want      int64
	}{
		{"single", rediscore.Mark("tok"), 1},
		{"single", rediscore.Mark("to"), -1},
		{"single", "tok/", -1},
		{"redlock", "tok/", 1},
		{"redlock", rediscore.Mark("tok/3"), 1},
		{"redlock", rediscore.Mark("tok/2"), -1},
		{"redlock", rediscore.Mark("tok"), -1},
		{"redlock", "to/", -1},
		{"missing", rediscore.Mark("tok"), 0},
	}
	reset := func() {
		t.Helper()
		for k, v := range values {
			if err := c.Set(ctx, k, v, 10*time.Second).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	exts := make([]rediscore.Extension, len(cases))
	for i, tc := range cases {
		reset()
		got, err := rediscore.Refresh.Run(ctx, c, []string{tc.key}, tc.mark, 60_000).Int64()
		if err != nil || got != tc.want {
			t.Errorf("Refresh(%s, %q) = %d, %v; want %d", tc.key, tc.mark, got, err, tc.want)
		}
		checkRefreshed(t, c, values, tc.key, tc.want == 1)
		exts[i] = rediscore.Extension{Key: tc.key, Mark: tc.mark, TTL: 60_000}
	}
	reset()
	codes, err := rediscore.RefreshBatchOf(exts, false, 4).Run(ctx, c, rediscore.RefreshBatch, len(exts))
	if err != nil {
		t.Fatal(err)
	}
	for i, tc := range cases {
		if codes[i] != tc.want {
			t.Errorf("RefreshBatch: %s with %q answered %d, want %d", tc.key, tc.mark, codes[i], tc.want)
		}
	}
}

// checkRefreshed checks that key still holds its value (or is still
// missing) and has been extended or not.
func checkRefreshed(t *testing.T, c *redis.Client, values map[string]string, key string, extended bool) {
	t.Helper()
	v, err := c.Get(t.Context(), key).Result()
	if want, ok := values[key]; !ok && err != redis.Nil || ok && v != want {
		t.Errorf("after the refresh %s = %q, %v; want %q", key, v, err, values[key])
	}
	if ttl := c.PTTL(t.Context(), key).Val(); values[key] != "" && (ttl > 10*time.Second) != extended {
		t.Errorf("after the refresh %s has %s left; extended: %v", key, ttl, extended)
	}
}
