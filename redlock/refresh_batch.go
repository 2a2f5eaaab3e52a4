package redlock

import (
	"context"
	"fmt"
	"time"

	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/internal/redisscript"
	"github.com/redis/go-redis/v9"
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
	tallies := d.askEach(ctx, timeout, len(items), func(ctx context.Context, i int) ([]int64, error) {
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

// askEach runs op on every node in parallel, as ask does, for a request
// about m locks at once: op answers one code per lock. It returns one
// tally per lock once every lock's outcome is decided, every node has
// answered, the node timeout (twice, as in ask) passes or ctx is done.
func (d *redlock) askEach(ctx context.Context, timeout time.Duration, m int, op func(ctx context.Context, i int) ([]int64, error)) []tally {
	ch := spread(ctx, true, d, timeout, op)
	n := len(d.nodes)
	ts := make([]tally, m)
	for j := range ts {
		ts[j].heard = make([]bool, n)
	}
	timer := time.NewTimer(2 * timeout)
	defer timer.Stop()
wait:
	for answered := 0; answered < n && !allDecided(ts, n, d.quorum); {
		select {
		case r := <-ch:
			answered++
			err := r.a.err
			if err == nil && len(r.a.val) != m {
				err = d.nodeErr(r.i, fmt.Errorf("batch refresh answered %d results for %d locks", len(r.a.val), m))
			}
			for j := range ts {
				var code int64
				if err == nil {
					code = r.a.val[j]
				}
				ts[j].add(r.i, code, err)
			}
		case <-timer.C:
			break wait
		case <-ctx.Done():
			break wait
		}
	}
	for j := range ts {
		ts[j].silent(d)
	}
	return ts
}

func allDecided(ts []tally, n, q int) bool {
	for j := range ts {
		if !ts[j].decided(n, q) {
			return false
		}
	}
	return true
}

// refreshNode refreshes items on one node: one refresh_batch call per
// refreshBatchMax items (per hash slot on a Cluster node), pipelined, by
// digest, or by source after a NOSCRIPT (which caches the script again).
// It answers one code per item, in order.
func (d *redlock) refreshNode(ctx context.Context, n node, items []driver.RefreshItem) ([]int64, error) {
	groups := batchGroups(items, n.cluster)
	cmds, err := runRefreshBatches(ctx, n.client, items, groups, false)
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		cmds, err = runRefreshBatches(ctx, n.client, items, groups, true)
	}
	if err != nil {
		return nil, err
	}
	codes := make([]int64, len(items))
	for g, idx := range groups {
		got, err := cmds[g].Int64Slice()
		if err == nil && len(got) != len(idx) {
			err = fmt.Errorf("batch refresh answered %d results for %d locks", len(got), len(idx))
		}
		if err != nil {
			return nil, err
		}
		for k, i := range idx {
			codes[i] = got[k]
		}
	}
	return codes, nil
}

// batchGroups splits the indexes of items into refresh_batch calls: at
// most refreshBatchMax each, and one hash slot each when the node is a
// Cluster.
func batchGroups(items []driver.RefreshItem, cluster bool) [][]int {
	bySlot := map[int]int{}
	var groups [][]int
	for i, it := range items {
		slot := 0
		if cluster {
			slot = redisscript.Slot(lockKey(it.Name))
		}
		g, ok := bySlot[slot]
		if !ok || len(groups[g]) == refreshBatchMax {
			g = len(groups)
			bySlot[slot] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], i)
	}
	return groups
}

func runRefreshBatches(ctx context.Context, c redis.Cmdable, items []driver.RefreshItem, groups [][]int, source bool) ([]*redis.Cmd, error) {
	cmds := make([]*redis.Cmd, len(groups))
	_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for g, idx := range groups {
			keys := make([]string, len(idx))
			args := make([]any, 0, 2*len(idx))
			for k, i := range idx {
				keys[k] = lockKey(items[i].Name)
				args = append(args, items[i].Token, items[i].TTL.Milliseconds())
			}
			if source {
				cmds[g] = refreshBatchScript.Eval(ctx, p, keys, args...)
			} else {
				cmds[g] = refreshBatchScript.EvalSha(ctx, p, keys, args...)
			}
		}
		return nil
	})
	return cmds, err
}

var _ driver.BatchRefresher = (*redlock)(nil)
