package redislock

import (
	"context"

	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/internal/rediscore"
)

// maxReleaseBatch bounds one release script call, so that one script never
// blocks the server for long.
const maxReleaseBatch = 1000

// ReleaseBatch implements driver.BatchReleaser: one release script call
// per hash slot (and per 1,000 leases), all sent in one pipeline, so that
// Locker.Close on 10,000 leases costs one round trip per node. Each lock
// is handed to its queue's head as a single release hands it.
func (d *redisDriver) ReleaseBatch(ctx context.Context, items []driver.ReleaseItem) ([]error, error) {
	return bounded(ctx, d, func() ([]error, error) { return d.releaseBatch(ctx, items) })
}

func (d *redisDriver) releaseBatch(ctx context.Context, items []driver.ReleaseItem) ([]error, error) {
	keys := make([]string, len(items))
	for i, it := range items {
		keys[i] = d.keys.Lock(it.Name)
	}
	b := rediscore.Batch{Groups: rediscore.Group(keys, d.cluster, maxReleaseBatch)}
	b.Calls = make([]rediscore.Call, len(b.Groups))
	for g, idx := range b.Groups {
		b.Calls[g] = d.releaseCall(items, idx)
	}
	codes, err := b.Run(ctx, d.client, releaseScript, len(items))
	if err != nil {
		return nil, rediscore.Classify(err)
	}
	return outcomes(codes), nil
}

// releaseCall is the release script's call of items[idx], which share a
// fence counter (one server, or one Cluster slot).
func (d *redisDriver) releaseCall(items []driver.ReleaseItem, idx []int) rediscore.Call {
	c := rediscore.Call{Keys: make([]string, 1, 1+5*len(idx)), Args: make([]any, 1, 1+len(idx))}
	c.Args[0] = handoffLease.Milliseconds()
	for _, i := range idx {
		ks := d.keys.Set(items[i].Name, d.cluster)
		c.Keys[0] = ks[1]
		c.Keys = append(c.Keys, releaseKeys(ks)...)
		c.Args = append(c.Args, rediscore.Mark(items[i].Token))
	}
	return c
}
