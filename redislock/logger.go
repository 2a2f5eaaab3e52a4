package redislock

import (
	"log/slog"

	"github.com/dlockdev/dlock/internal/rediscore"
	"github.com/redis/go-redis/v9"
)

// SetLogger makes l receive the driver's warnings and go-redis's own log
// lines, unless Config.Logger was set (it wins). NewLocker calls it with
// the Locker's logger (dlock.WithLogger).
func (d *redisDriver) SetLogger(l *slog.Logger) {
	if d.cfg.logger != nil || l == nil {
		return
	}
	d.useLogger(l)
}

// useLogger makes l the driver's logger, and go-redis's: go-redis has one
// logger per process, so the last driver given a logger wins.
func (d *redisDriver) useLogger(l *slog.Logger) {
	d.logger.Store(l)
	routeLogs(d.client, l)
}

// routeLogs sends go-redis's log lines to l, with client's password hidden.
func routeLogs(client redis.UniversalClient, l *slog.Logger) {
	rediscore.HideSecret(password(client))
	rediscore.SetLogger(l)
}

// log is the driver's logger: Config.Logger, the Locker's, or
// slog.Default().
func (d *redisDriver) log() *slog.Logger {
	if l := d.logger.Load(); l != nil {
		return l
	}
	return slog.Default()
}

// password is client's password, if it has one.
func password(client redis.UniversalClient) string {
	switch c := client.(type) {
	case *redis.Client:
		return c.Options().Password
	case *redis.ClusterClient:
		return c.Options().Password
	}
	return ""
}
