// Package rediscore holds the Lua scripts of the Redis lock drivers and
// the key layout they share.
//
// Each script is an embedded .lua file wrapped in a *redis.Script: callers
// use its Run, which sends EVALSHA and falls back to EVAL (which also
// caches the script again) when the server answers NOSCRIPT, e.g. after a
// restart or SCRIPT FLUSH.
package rediscore

import (
	"context"
	_ "embed"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed acquire.lua
	acquireSrc string
	//go:embed refresh.lua
	refreshSrc string
	//go:embed refresh_batch.lua
	refreshBatchSrc string
	//go:embed release.lua
	releaseSrc string
	//go:embed inspect.lua
	inspectSrc string
	//go:embed force_release.lua
	forceReleaseSrc string
	//go:embed dequeue.lua
	dequeueSrc string
	//go:embed ledger.lua
	ledgerSrc string
	//go:embed claim_run.lua
	claimRunSrc string
	//go:embed finish_run.lua
	finishRunSrc string
)

// The scripts. Each file documents its KEYS, ARGV and reply.
var (
	Acquire      = redis.NewScript(acquireSrc)
	Refresh      = redis.NewScript(refreshSrc)
	RefreshBatch = redis.NewScript(refreshBatchSrc)
	Release      = redis.NewScript(releaseSrc)
	Inspect      = redis.NewScript(inspectSrc)
	ForceRelease = redis.NewScript(forceReleaseSrc)
	Dequeue      = redis.NewScript(dequeueSrc)
	// ClaimRun and FinishRun are the run ledger's writes (driver.Ledger),
	// each appended to the functions they share (ledger.lua).
	ClaimRun  = redis.NewScript(ledgerSrc + claimRunSrc)
	FinishRun = redis.NewScript(ledgerSrc + finishRunSrc)
)

// All lists every script, for Load.
func All() []*redis.Script {
	return []*redis.Script{Acquire, Refresh, RefreshBatch, Release, Inspect, ForceRelease, Dequeue, ClaimRun, FinishRun}
}

// Load caches every script on the server (on every master of a Cluster),
// so that the first EVALSHA of each does not cost a NOSCRIPT round trip.
func Load(ctx context.Context, c redis.Scripter) error {
	for _, s := range All() {
		if err := s.Load(ctx, c).Err(); err != nil {
			return err
		}
	}
	return nil
}
