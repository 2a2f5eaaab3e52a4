package redislock

import (
	"context"
	"fmt"

	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/internal/redisscript"
	"github.com/redis/go-redis/v9"
)

// RefreshBatch implements driver.BatchRefresher: one refresh_batch script
// call per hash slot (a single call on a single server), all sent in one
// pipeline, so a Cluster costs one round trip per node.
//
// Under Config.ReplicaSync each slot's batch runs on a connection to its
// primary followed by WAIT; a batch the replicas did not confirm fails as
// a whole (every lease in it unconfirmed, none reported lost).
func (d *redisDriver) RefreshBatch(ctx context.Context, items []driver.RefreshItem) ([]error, error) {
	return bounded(ctx, d, func() ([]error, error) { return d.refreshBatch(ctx, items) })
}

func (d *redisDriver) refreshBatch(ctx context.Context, items []driver.RefreshItem) ([]error, error) {
	groups := d.groupBySlot(items)
	var cmds []*redis.Cmd
	var err error
	if d.cfg.replicas > 0 {
		cmds, err = d.runSynced(ctx, items, groups)
	} else {
		cmds, err = d.runBatches(ctx, d.client, items, groups, false)
		if isNoScript(err) {
			cmds, err = d.runBatches(ctx, d.client, items, groups, true)
		}
	}
	if err != nil {
		return nil, redisscript.Classify(err)
	}
	results := make([]error, len(items))
	for g, idx := range groups {
		codes, err := cmds[g].Int64Slice()
		if err == nil && len(codes) != len(idx) {
			err = fmt.Errorf("redislock: batch refresh answered %d results for %d locks", len(codes), len(idx))
		}
		if err != nil {
			return nil, err
		}
		for j, i := range idx {
			results[i] = outcome(codes[j])
		}
	}
	return results, nil
}

// groupBySlot returns the indexes of items grouped by their Cluster slot
// (one group when the client is not a Cluster client).
func (d *redisDriver) groupBySlot(items []driver.RefreshItem) [][]int {
	names := make([]string, len(items))
	for i, it := range items {
		names[i] = it.Name
	}
	return d.groupNames(names)
}

// groupNames returns the indexes of names grouped by their Cluster slot
// (one group when the client is not a Cluster client).
func (d *redisDriver) groupNames(names []string) [][]int {
	if !d.cluster {
		all := make([]int, len(names))
		for i := range all {
			all[i] = i
		}
		return [][]int{all}
	}
	bySlot := map[int]int{}
	var groups [][]int
	for i, name := range names {
		s := slot(d.keys.Lock(name))
		g, ok := bySlot[s]
		if !ok {
			g = len(groups)
			bySlot[s] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], i)
	}
	return groups
}

// runBatches pipelines one script call per group, by digest or (after a
// NOSCRIPT) by source, which also caches the script again.
func (d *redisDriver) runBatches(ctx context.Context, c redis.Cmdable, items []driver.RefreshItem, groups [][]int, source bool) ([]*redis.Cmd, error) {
	cmds := make([]*redis.Cmd, len(groups))
	_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for g, idx := range groups {
			keys := make([]string, len(idx))
			args := make([]any, 0, 2*len(idx))
			for j, i := range idx {
				keys[j] = d.keys.Lock(items[i].Name)
				args = append(args, items[i].Token, ttlMillis(items[i].TTL))
			}
			if source {
				cmds[g] = redisscript.RefreshBatch.Eval(ctx, p, keys, args...)
			} else {
				cmds[g] = redisscript.RefreshBatch.EvalSha(ctx, p, keys, args...)
			}
		}
		return nil
	})
	return cmds, err
}

// runSynced runs each group's batch on its primary, then WAIT there.
func (d *redisDriver) runSynced(ctx context.Context, items []driver.RefreshItem, groups [][]int) ([]*redis.Cmd, error) {
	cmds := make([]*redis.Cmd, len(groups))
	for g, idx := range groups {
		what := fmt.Sprintf("batch refresh of %d leases", len(idx))
		err := d.synced(ctx, d.keys.Lock(items[idx[0]].Name), what, func(c *redis.Conn) error {
			one, err := d.runBatches(ctx, c, items, [][]int{idx}, false)
			if isNoScript(err) {
				one, err = d.runBatches(ctx, c, items, [][]int{idx}, true)
			}
			if err == nil {
				cmds[g] = one[0]
			}
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	return cmds, nil
}

func isNoScript(err error) bool {
	return err != nil && redis.HasErrorPrefix(err, "NOSCRIPT")
}

// slot is Redis Cluster's key slot of key.
func slot(key string) int { return redisscript.Slot(key) }
