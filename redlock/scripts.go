package redlock

import (
	_ "embed"

	"github.com/dlockdev/dlock/internal/rediscore"
	"github.com/redis/go-redis/v9"
)

// The driver's own Lua scripts, one per node operation: phase 1 and phase
// 2 of a quorum-fenced grant, the release that wakes every node's waiters
// with one id, and the force-release. Each file documents its KEYS, ARGV
// and reply. They keep the key layout and lock value of the single-node
// driver (rediscore), with "token/attempt" as the token; the refresh and
// run ledger scripts are rediscore's, run on each node.
var (
	//go:embed counter.lua
	counterSrc string
	//go:embed acquire.lua
	acquireSrc string
	//go:embed raise.lua
	raiseSrc string
	//go:embed release.lua
	releaseSrc string
	//go:embed force.lua
	forceSrc string

	acquireScript = rediscore.WithTokenCheck(counterSrc + acquireSrc)
	raiseScript   = rediscore.WithTokenCheck(counterSrc + raiseSrc)
	releaseScript = rediscore.WithTokenCheck(releaseSrc)
	forceScript   = redis.NewScript(counterSrc + forceSrc)
)

// keyPrefix starts every Redlock key and channel. It extends the
// single-node driver's default prefix, so that neither driver takes the
// other's keys for its locks.
const keyPrefix = rediscore.DefaultPrefix + "redlock:"

// layout is the driver's key layout: a name's lock key, its release
// channel and the node's fence counter are those of the single-node
// driver under keyPrefix.
var layout = rediscore.Keys{Prefix: keyPrefix}

// keys returns the KEYS of the fence-handling scripts for name on n: the
// lock key and the node's fence counter (one per node, or one per hash
// slot when the node is a Redis Cluster). The counter scripts derive the
// name's legacy counter from the lock key (counter.lua).
func (n node) keys(name string) []string {
	return []string{layout.Lock(name), layout.Counter(name, n.cluster)}
}

// anyAttempt is the mark (rediscore.Mark) of every attempt of token: its
// lock values start "token/attempt\n".
func anyAttempt(token string) string { return token + "/" }

// oneAttempt is the mark of token's attempt seq alone.
func oneAttempt(token, seq string) string { return rediscore.Mark(token + "/" + seq) }
