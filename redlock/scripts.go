package redlock

import (
	_ "embed"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The driver's own Lua scripts, one per node operation. They follow the
// value format of the single-node driver (internal/redisscript) but live
// here: phase 1 and phase 2 of a quorum-fenced grant are Redlock's alone.
var (
	//go:embed acquire.lua
	acquireSrc string
	//go:embed raise.lua
	raiseSrc string
	//go:embed refresh.lua
	refreshSrc string
	//go:embed release.lua
	releaseSrc string

	acquireScript = redis.NewScript(acquireSrc)
	raiseScript   = redis.NewScript(raiseSrc)
	refreshScript = redis.NewScript(refreshSrc)
	releaseScript = redis.NewScript(releaseSrc)
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

func fenceKey(name string) string { return lockKey(name) + ":fence" }

func channelOf(name string) string { return lockKey(name) + ":released" }
