package redlock

import (
	"log/slog"

	"github.com/dlockdev/dlock/internal/rediscore"
)

// SetLogger implements driver.LogSetter: go-redis's own log lines
// ("failed to dial after 5 attempts", repeated while a node is down) go to
// l at Debug level, passwords hidden. go-redis has one logger per process,
// so the last Locker that set one receives them (internal/rediscore).
func (d *redlock) SetLogger(l *slog.Logger) { rediscore.SetLogger(l) }
