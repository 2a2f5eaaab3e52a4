package redislock

import (
	"context"
	_ "embed"

	"github.com/dlockdev/dlock/internal/rediscore"
	"github.com/redis/go-redis/v9"
)

// The driver's own Lua scripts: those of the fair queue (acquire,
// release with its hand-off, dequeue) and of the admin calls. Each file
// documents its KEYS, ARGV and reply. The scripts Redlock runs too
// (refresh, the run ledger) are rediscore's.
var (
	//go:embed acquire.lua
	acquireSrc string
	//go:embed release.lua
	releaseSrc string
	//go:embed dequeue.lua
	dequeueSrc string
	//go:embed inspect.lua
	inspectSrc string
	//go:embed force_release.lua
	forceReleaseSrc string
	// tellSrc, prepended to the scripts that wake a queued waiter, says
	// where its message goes: its Locker's inbox, or its own channel.
	//go:embed tell.lua
	tellSrc string

	acquireScript      = redis.NewScript(tellSrc + acquireSrc)
	releaseScript      = rediscore.WithTokenCheck(tellSrc + releaseSrc)
	dequeueScript      = rediscore.WithTokenCheck(tellSrc + dequeueSrc)
	inspectScript      = redis.NewScript(inspectSrc)
	forceReleaseScript = redis.NewScript(tellSrc + forceReleaseSrc)
)

// loadScripts caches every script the driver runs on the server (on
// every master of a Cluster), so that the first EVALSHA of each does not
// cost a NOSCRIPT round trip.
func loadScripts(ctx context.Context, c redis.Scripter) error {
	return rediscore.Load(ctx, c, acquireScript, rediscore.Refresh, rediscore.RefreshBatch, releaseScript,
		inspectScript, forceReleaseScript, dequeueScript, rediscore.ClaimRun, rediscore.FinishRun)
}
