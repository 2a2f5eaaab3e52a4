package redislock

import (
	"context"
	"fmt"

	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/internal/rediscore"
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
	names := make([]string, len(items))
	for i, it := range items {
		names[i] = it.Name
	}
	groups := d.groupNames(names, 0)
	calls := make([]rediscore.Call, len(groups))
	for g, idx := range groups {
		calls[g] = d.refreshCall(items, idx)
	}
	var cmds []*redis.Cmd
	var err error
	if d.cfg.replicas > 0 {
		cmds, err = d.runSynced(ctx, items, groups, calls)
	} else {
		cmds, err = rediscore.RunPipelined(ctx, d.client, rediscore.RefreshBatch, calls)
	}
	if err != nil {
		return nil, rediscore.Classify(err)
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

// groupNames returns the indexes of names grouped into the calls of a
// batch: by Cluster slot (one group when the client is not a Cluster
// client), at most max a call when max > 0.
func (d *redisDriver) groupNames(names []string, max int) [][]int {
	keys := make([]string, len(names))
	for i, name := range names {
		keys[i] = d.keys.Lock(name)
	}
	return rediscore.Group(keys, d.cluster, max)
}

// refreshCall is the refresh_batch call of items[idx].
func (d *redisDriver) refreshCall(items []driver.RefreshItem, idx []int) rediscore.Call {
	c := rediscore.Call{Keys: make([]string, len(idx)), Args: make([]any, 0, 2*len(idx))}
	for j, i := range idx {
		c.Keys[j] = d.keys.Lock(items[i].Name)
		c.Args = append(c.Args, items[i].Token, ttlMillis(items[i].TTL))
	}
	return c
}

// runSynced runs each group's batch on its primary, then WAIT there.
func (d *redisDriver) runSynced(ctx context.Context, items []driver.RefreshItem, groups [][]int, calls []rediscore.Call) ([]*redis.Cmd, error) {
	cmds := make([]*redis.Cmd, len(groups))
	for g, idx := range groups {
		what := fmt.Sprintf("batch refresh of %d leases", len(idx))
		err := d.synced(ctx, d.keys.Lock(items[idx[0]].Name), what, func(c *redis.Conn) error {
			one, err := rediscore.RunPipelined(ctx, c, rediscore.RefreshBatch, calls[g:g+1])
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
