package rediscore

import (
	"fmt"

	"github.com/redis/go-redis/v9"
)

// CheckOptions refuses the values of a URL's go-redis options that
// go-redis would silently replace by its default instead of refusing: a
// negative database number (no SELECT: database 0), a negative pool size
// or connection count, a protocol other than 2 or 3. Both Redis drivers
// call it on the options parsed from a URL, so that a URL names all its
// settings or fails.
func CheckOptions(o *redis.Options) error {
	for _, k := range []struct {
		key string
		v   int
	}{
		{"database number", o.DB}, {"pool_size", o.PoolSize}, {"min_idle_conns", o.MinIdleConns},
		{"max_idle_conns", o.MaxIdleConns}, {"max_active_conns", o.MaxActiveConns},
	} {
		if k.v < 0 {
			return fmt.Errorf("%s %d: want 0 or more (go-redis would use its default instead)", k.key, k.v)
		}
	}
	if o.Protocol != 0 && o.Protocol != 2 && o.Protocol != 3 {
		return fmt.Errorf("protocol %d: want 2 (RESP2) or 3 (RESP3)", o.Protocol)
	}
	return nil
}

// CheckClusterOptions is CheckOptions for a Cluster's options.
func CheckClusterOptions(o *redis.ClusterOptions) error {
	return CheckOptions(&redis.Options{PoolSize: o.PoolSize, MinIdleConns: o.MinIdleConns,
		MaxIdleConns: o.MaxIdleConns, MaxActiveConns: o.MaxActiveConns, Protocol: o.Protocol})
}
