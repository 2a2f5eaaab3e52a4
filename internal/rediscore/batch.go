package rediscore

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// Call is one script call of a batch: its KEYS and ARGV.
type Call struct {
	Keys []string
	Args []any
}

// RunPipelined sends one call of s per element of calls, in one pipeline
// on c, by digest; if the server answers NOSCRIPT (after a restart or a
// SCRIPT FLUSH) it sends them again by source, which also caches the
// script again. The commands are in the order of calls.
func RunPipelined(ctx context.Context, c redis.Cmdable, s *redis.Script, calls []Call) ([]*redis.Cmd, error) {
	cmds, err := pipeline(ctx, c, s, calls, false)
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		cmds, err = pipeline(ctx, c, s, calls, true)
	}
	return cmds, err
}

func pipeline(ctx context.Context, c redis.Cmdable, s *redis.Script, calls []Call, source bool) ([]*redis.Cmd, error) {
	cmds := make([]*redis.Cmd, len(calls))
	_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, call := range calls {
			if source {
				cmds[i] = s.Eval(ctx, p, call.Keys, call.Args...)
			} else {
				cmds[i] = s.EvalSha(ctx, p, call.Keys, call.Args...)
			}
		}
		return nil
	})
	return cmds, err
}

// Group returns the indexes of keys grouped into the calls of a batch: by
// Redis Cluster hash slot when cluster is set (a script touches one slot),
// one group otherwise, and at most max indexes a group when max > 0.
func Group(keys []string, cluster bool, max int) [][]int {
	current := map[int]int{} // slot → index of its group being filled
	var groups [][]int
	for i, key := range keys {
		s := 0
		if cluster {
			s = Slot(key)
		}
		g, ok := current[s]
		if !ok || max > 0 && len(groups[g]) == max {
			g = len(groups)
			current[s] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], i)
	}
	return groups
}
