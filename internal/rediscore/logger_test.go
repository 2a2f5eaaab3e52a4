package rediscore

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
)

// TestGoRedisLog: a go-redis line goes, at Debug, to the logger of the
// last SetLogger, with every hidden secret replaced by xxxxx.
func TestGoRedisLog(t *testing.T) {
	var first, last bytes.Buffer
	debug := &slog.HandlerOptions{Level: slog.LevelDebug}
	SetLogger(slog.New(slog.NewTextHandler(&first, debug)))
	SetLogger(slog.New(slog.NewTextHandler(&last, debug)))
	t.Cleanup(func() { current.Store(nil) })
	HideSecret("hunter2")
	HideSecret("")
	goRedisLog{}.Printf(context.Background(), "redis: dial %s: %v\n", "redis://:hunter2@db:6379", "refused")
	got := last.String()
	if first.Len() != 0 {
		t.Errorf("an earlier logger got the line: %s", first.String())
	}
	if !strings.Contains(got, "level=DEBUG") || !strings.Contains(got, "redis://:xxxxx@db:6379: refused") ||
		!strings.Contains(got, "component=go-redis") {
		t.Errorf("line = %q, want it at DEBUG with the password hidden", got)
	}
	if strings.Contains(got, "hunter2") {
		t.Errorf("line shows the password: %q", got)
	}
}
