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
	exts := make([]rediscore.Extension, len(items))
	for i, it := range items {
		exts[i] = rediscore.Extension{Key: d.keys.Lock(it.Name), Mark: rediscore.Mark(it.Token), TTL: ttlMillis(it.TTL)}
	}
	b := rediscore.RefreshBatchOf(exts, d.cluster, 0)
	var cmds []*redis.Cmd
	var err error
	if d.cfg.replicas > 0 {
		cmds, err = d.runSynced(ctx, exts, b)
	} else {
		cmds, err = rediscore.RunPipelined(ctx, d.client, rediscore.RefreshBatch, b.Calls)
	}
	if err != nil {
		return nil, rediscore.Classify(err)
	}
	codes, err := b.Codes(cmds, len(items))
	if err != nil {
		return nil, err
	}
	return outcomes(codes), nil
}

// outcomes maps the codes of a batch (outcome) one by one.
func outcomes(codes []int64) []error {
	results := make([]error, len(codes))
	for i, c := range codes {
		results[i] = outcome(c)
	}
	return results
}

// runSynced runs each group's batch on its primary, then WAIT there.
func (d *redisDriver) runSynced(ctx context.Context, exts []rediscore.Extension, b rediscore.Batch) ([]*redis.Cmd, error) {
	cmds := make([]*redis.Cmd, len(b.Groups))
	for g, idx := range b.Groups {
		what := fmt.Sprintf("batch refresh of %d leases", len(idx))
		err := d.synced(ctx, exts[idx[0]].Key, what, func(c *redis.Conn) error {
			one, err := rediscore.RunPipelined(ctx, c, rediscore.RefreshBatch, b.Calls[g:g+1])
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
