package redislock_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/dlockdev/dlock/internal/testing/testserver"
	"github.com/dlockdev/dlock/redislock"
)

// TestPersistenceWarning: a server without appendonly is warned about
// once per process; one with it, or with CONFIG disabled, is not.
func TestPersistenceWarning(t *testing.T) {
	cases := []struct {
		args []string
		want int
	}{
		{nil, 1},
		{[]string{"--appendonly", "yes"}, 0},
		{[]string{"--rename-command", "CONFIG", ""}, 0},
	}
	for _, c := range cases {
		srv := testserver.Redis(t, c.args...)
		var buf bytes.Buffer
		cfg := redislock.Config{Logger: slog.New(slog.NewTextHandler(&buf, nil))}
		for range 2 {
			l, err := cfg.Locker(client(t, srv.Addr))
			if err != nil {
				t.Fatal(err)
			}
			_ = l.Close()
		}
		if n := strings.Count(buf.String(), "appendonly is off"); n != c.want {
			t.Errorf("server %v: %d warnings, want %d:\n%s", c.args, n, c.want, buf.String())
		}
	}
}
