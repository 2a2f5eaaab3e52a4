package redlock

import (
	"context"
	"fmt"
	"time"

	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/internal/rediscore"
)

// refreshBatchMax bounds how many leases one refresh_batch call carries.
// The portable layer's batches are no larger, so a node gets one call per
// batch (one per hash slot in it when the node is a Cluster).
const refreshBatchMax = 1000

// RefreshBatch implements driver.BatchRefresher: every node gets one
// pipeline of refresh_batch calls, all nodes at once, and each lease's
// outcome is decided from the nodes' answers exactly as Refresh decides
// one: extended when a majority extended it in time, driver.ErrTakenOver
// or driver.ErrExpired when a majority says the token does not hold it
// there, else an error naming the nodes that failed. A node's answer
// counts if it comes within the node timeout per call of its pipeline,
// and never later than the shortest TTL in the batch.
func (d *redlock) RefreshBatch(ctx context.Context, items []driver.RefreshItem) ([]error, error) {
	if len(items) == 0 {
		return nil, nil
	}
	start := time.Now()
	ttl := items[0].TTL
	for _, it := range items[1:] {
		ttl = min(ttl, it.TTL)
	}
	calls := (len(items) + refreshBatchMax - 1) / refreshBatchMax
	timeout := min(d.cfg.nodeTimeout*time.Duration(calls), ttl)
	tallies := d.askEach(ctx, timeout, 0, len(items), func(ctx context.Context, i int) ([]int64, error) {
		return d.refreshNode(ctx, d.nodes[i], items)
	})
	took := time.Since(start)
	results := make([]error, len(items))
	for j, it := range items {
		results[j] = tallies[j].outcome("refresh", len(d.nodes), d.quorum)
		if results[j] == nil && took >= it.TTL-driver.ClockDrift(it.TTL) {
			results[j] = fmt.Errorf("redlock: refresh confirmed after %s, past its %s TTL", took.Round(time.Millisecond), it.TTL)
		}
	}
	return results, nil
}

// refreshNode refreshes items on one node: one refresh_batch call per
// refreshBatchMax items (per hash slot on a Cluster node), pipelined. It
// answers one code per item, in order.
func (d *redlock) refreshNode(ctx context.Context, n node, items []driver.RefreshItem) ([]int64, error) {
	exts := make([]rediscore.Extension, len(items))
	for i, it := range items {
		exts[i] = rediscore.Extension{Key: layout.Lock(it.Name), Mark: anyAttempt(it.Token), TTL: it.TTL.Milliseconds()}
	}
	b := rediscore.RefreshBatchOf(exts, n.cluster, refreshBatchMax)
	return b.Run(ctx, n.client, rediscore.RefreshBatch, len(items))
}

var _ driver.BatchRefresher = (*redlock)(nil)
