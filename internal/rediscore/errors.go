package rediscore

import (
	"errors"
	"strings"

	"github.com/dlockdev/dlock/driver"
	"github.com/redis/go-redis/v9"
)

// permanentPrefixes are the error replies that retrying cannot cure: bad
// credentials, an ACL that forbids the scripts or keys, a script the
// server cannot run (a renamed or disabled EVAL, a key of the wrong type
// written by someone else, keys in different Cluster slots). Transient
// replies (LOADING, BUSY, READONLY during a failover, OOM, TRYAGAIN,
// MOVED/ASK, CLUSTERDOWN) are not here: the next attempt may succeed.
var permanentPrefixes = []string{
	"NOAUTH", "WRONGPASS", "NOPERM", "WRONGTYPE", "CROSSSLOT",
	"ERR Error running script", "ERR user_script", "ERR unknown command",
	"ERR AUTH", "ERR invalid password", "ERR Client sent AUTH",
}

// Classify marks err permanent (driver.Permanent) when it is an error
// reply from Redis that no retry can cure; anything else, including every
// transport failure and context error, is returned unchanged.
func Classify(err error) error {
	var rerr redis.Error
	if err == nil || !errors.As(err, &rerr) {
		return err
	}
	msg := rerr.Error()
	for _, p := range permanentPrefixes {
		if strings.HasPrefix(msg, p) {
			return driver.Permanent(err)
		}
	}
	return err
}
