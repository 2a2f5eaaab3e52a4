package redisscript

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/redis/go-redis/v9"
)

var routeOnce sync.Once

// RouteLogs sends go-redis's own log lines (such as "failed to dial after
// 5 attempts", printed about once a second while a dead server is retried)
// to slog.Default at Debug level instead of standard error. go-redis has
// one logger per process, so this is done once, and only by the drivers'
// URL openers: a program that builds its own go-redis clients (and may
// have set its own logger) keeps its choice.
func RouteLogs() {
	routeOnce.Do(func() { redis.SetLogger(slogLogger{}) })
}

type slogLogger struct{}

func (slogLogger) Printf(ctx context.Context, format string, v ...any) {
	slog.Default().DebugContext(ctx, fmt.Sprintf(format, v...), "component", "go-redis")
}
