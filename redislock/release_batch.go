package redislock

import (
	"context"
	"fmt"

	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/internal/redisscript"
	"github.com/redis/go-redis/v9"
)

// maxReleaseBatch bounds one release_batch call, so that one script never
// blocks the server for long.
const maxReleaseBatch = 1000

// ReleaseBatch implements driver.BatchReleaser: one release_batch script
// call per hash slot (and per 1,000 leases), all sent in one pipeline, so
// that Locker.Close on 10,000 leases costs one round trip per node.
func (d *redisDriver) ReleaseBatch(ctx context.Context, items []driver.ReleaseItem) ([]error, error) {
	return bounded(ctx, d, func() ([]error, error) { return d.releaseBatch(ctx, items) })
}

func (d *redisDriver) releaseBatch(ctx context.Context, items []driver.ReleaseItem) ([]error, error) {
	names := make([]string, len(items))
	for i, it := range items {
		names[i] = it.Name
	}
	groups := chunk(d.groupNames(names), maxReleaseBatch)
	cmds, err := d.releaseBatches(ctx, items, groups, false)
	if isNoScript(err) {
		cmds, err = d.releaseBatches(ctx, items, groups, true)
	}
	if err != nil {
		return nil, redisscript.Classify(err)
	}
	results := make([]error, len(items))
	for g, idx := range groups {
		codes, err := cmds[g].Int64Slice()
		if err == nil && len(codes) != len(idx) {
			err = fmt.Errorf("redislock: batch release answered %d results for %d locks", len(codes), len(idx))
		}
		if err != nil {
			return nil, redisscript.Classify(err)
		}
		for j, i := range idx {
			results[i] = outcome(codes[j])
		}
	}
	return results, nil
}

func (d *redisDriver) releaseBatches(ctx context.Context, items []driver.ReleaseItem, groups [][]int, source bool) ([]*redis.Cmd, error) {
	cmds := make([]*redis.Cmd, len(groups))
	_, err := d.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for g, idx := range groups {
			keys := make([]string, 0, 2*len(idx))
			args := make([]any, 0, len(idx))
			for _, i := range idx {
				lock := d.keys.Lock(items[i].Name)
				keys = append(keys, lock, lock+":queue")
				args = append(args, items[i].Token)
			}
			if source {
				cmds[g] = redisscript.ReleaseBatch.Eval(ctx, p, keys, args...)
			} else {
				cmds[g] = redisscript.ReleaseBatch.EvalSha(ctx, p, keys, args...)
			}
		}
		return nil
	})
	return cmds, err
}

// chunk splits every group into pieces of at most n.
func chunk(groups [][]int, n int) [][]int {
	var out [][]int
	for _, g := range groups {
		for len(g) > n {
			out = append(out, g[:n])
			g = g[n:]
		}
		out = append(out, g)
	}
	return out
}
