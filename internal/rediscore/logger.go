package rediscore

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// go-redis has ONE logger per process (redis.SetLogger), not one per
// client. The drivers install goRedisLog there, once, and point it at a
// slog.Logger: the one most recently given to SetLogger, so that when
// several Lockers have their own loggers, the last one set wins for every
// client in the process.
var (
	installOnce sync.Once
	current     atomic.Pointer[slog.Logger]
	// secrets are the passwords of the drivers' clients, hidden from every
	// line (HideSecret).
	secrets sync.Map
)

// hidden replaces a secret in go-redis's lines.
const hidden = "xxxxx"

// RouteLogs installs the adapter that sends go-redis's own log lines (such
// as "redis: connection pool: failed to dial after 5 attempts", printed
// about once a second while a dead server is retried) to slog at Debug
// level instead of standard error: to the logger of the last SetLogger,
// or slog.Default() before any. It is done once per process, and only by
// drivers that were given a logger or opened from a URL: a program that
// builds its own go-redis clients (and may have set its own go-redis
// logger) keeps its choice.
func RouteLogs() {
	installOnce.Do(func() { redis.SetLogger(goRedisLog{}) })
}

// SetLogger makes go-redis's log lines go to l from now on (RouteLogs),
// for every client in the process: the last call wins. A nil l is
// ignored.
func SetLogger(l *slog.Logger) {
	if l == nil {
		return
	}
	current.Store(l)
	RouteLogs()
}

// HideSecret makes the adapter print xxxxx in place of s (a client's
// password) in every go-redis line. An empty s is ignored.
func HideSecret(s string) {
	if s != "" {
		secrets.Store(s, struct{}{})
	}
}

// goRedisLog is the redis.SetLogger adapter.
type goRedisLog struct{}

// Printf logs one go-redis line at Debug: the errors behind it reach the
// caller through the Locker's results (a failed acquire, a lost lease),
// and go-redis repeats it about once a second during an outage.
func (goRedisLog) Printf(ctx context.Context, format string, v ...any) {
	msg := strings.TrimSuffix(fmt.Sprintf(format, v...), "\n")
	secrets.Range(func(s, _ any) bool {
		msg = strings.ReplaceAll(msg, s.(string), hidden)
		return true
	})
	l := current.Load()
	if l == nil {
		l = slog.Default()
	}
	l.DebugContext(ctx, msg, "component", "go-redis")
}
