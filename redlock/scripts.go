package redlock

import (
	_ "embed"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The driver's own Lua scripts, one per node operation. They follow the
// value format of the single-node driver (internal/rediscore) but live
// here: phase 1 and phase 2 of a quorum-fenced grant are Redlock's alone.
var (
	//go:embed counter.lua
	counterSrc string
	//go:embed acquire.lua
	acquireSrc string
	//go:embed raise.lua
	raiseSrc string
	//go:embed refresh.lua
	refreshSrc string
	//go:embed refresh_batch.lua
	refreshBatchSrc string
	//go:embed release.lua
	releaseSrc string

	acquireScript = redis.NewScript(counterSrc + acquireSrc)
	raiseScript   = redis.NewScript(counterSrc + raiseSrc)
	refreshScript = redis.NewScript(refreshSrc)
	// refreshBatchScript is refreshScript for many locks in one call.
	refreshBatchScript = redis.NewScript(refreshBatchSrc)
	releaseScript      = redis.NewScript(releaseSrc)
)

// keyPrefix starts every Redlock key and channel. It differs from the
// single-node driver's "dlock:" so the two never read each other's keys.
const keyPrefix = "dlock:redlock:"

// escaper keeps a name's braces from ending the Cluster hash tag early,
// so that a lock key and its fence counter always share a slot.
var escaper = strings.NewReplacer("%", "%25", "}", "%7D")

// lockKey returns the lock key of name; its fence counter and release
// channel extend it.
func lockKey(name string) string { return keyPrefix + "{" + escaper.Replace(name) + "}" }

// legacyFenceKey returns the per-name fence counter that versions before
// the node-wide counter kept forever; the scripts fold it into the node's
// counter and delete it (counter.lua, which derives it from the lock key).
func legacyFenceKey(name string) string { return lockKey(name) + ":fence" }

// counterKey returns the node's fence counter for name: one key per node,
// or, when the node is a Redis Cluster, one per hash slot (a key in name's
// slot, so that a script can touch both).
func counterKey(name string, cluster bool) string {
	return adminKeys.Counter(name, cluster)
}

// keys returns the KEYS of the fence-handling scripts for name on n: the
// lock key and the node's fence counter.
func (n node) keys(name string) []string {
	return []string{lockKey(name), counterKey(name, n.cluster)}
}

func channelOf(name string) string { return lockKey(name) + ":released" }
