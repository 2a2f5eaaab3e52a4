package redislock

import (
	"context"
	"log/slog"
	"sync"

	"github.com/redis/go-redis/v9"
)

// warned remembers the servers already warned about.
// Process-wide so that a warning names a server once however many Lockers (one per job, say) open it.
var warned sync.Map

// warnPersistence logs once when the server runs without an append-only
// file: a restart then loses held locks and rolls back (or loses) the
// fence counters. Fences still never go backwards, thanks to the
// server-clock floor (see the package doc), but two holders may overlap.
// A server whose CONFIG command is disabled or renamed is not warned about.
func warnPersistence(ctx context.Context, c redis.UniversalClient, log *slog.Logger) {
	cfg, err := c.ConfigGet(ctx, "appendonly").Result()
	if err != nil || cfg["appendonly"] != "no" {
		return
	}
	save, _ := c.ConfigGet(ctx, "save").Result()
	addr := serverName(c)
	if _, dup := warned.LoadOrStore(addr, true); dup {
		return
	}
	log.Warn("redislock: the Redis server can lose lock state on restart: appendonly is off; "+
		"fences stay increasing through the server-clock floor, but held locks may be forgotten",
		"server", addr, "appendonly", "no", "save", save["save"])
}

func serverName(c redis.UniversalClient) string {
	switch c := c.(type) {
	case *redis.Client:
		return c.Options().Addr
	case *redis.ClusterClient:
		if a := c.Options().Addrs; len(a) > 0 {
			return a[0]
		}
	}
	return "redis"
}
