package redislock

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/internal/rediscore"
	"github.com/redis/go-redis/v9"
)

// scanCount is the COUNT hint of each SCAN step.
const scanCount = 500

// Inspect implements driver.Lister with the inspect script.
func (d *redisDriver) Inspect(ctx context.Context, name string) (driver.Holder, bool, error) {
	reply, err := inspectScript.Run(ctx, d.client, []string{d.keys.Lock(name)}).Slice()
	if err == redis.Nil {
		return driver.Holder{}, false, nil
	}
	if err != nil {
		return driver.Holder{}, false, rediscore.Classify(err)
	}
	return holderOf(name, reply)
}

func holderOf(name string, reply []any) (driver.Holder, bool, error) {
	raw, _ := reply[0].(string)
	v, err := rediscore.ParseValue(raw)
	if err != nil {
		return driver.Holder{}, false, fmt.Errorf("redislock: lock %q: %w", name, err)
	}
	return driver.Holder{Name: name, Owner: v.Owner, Fence: v.Fence, TTL: pttl(reply[1])}, true, nil
}

// List implements driver.Lister: SCAN for the lock keys (on every primary
// of a Cluster), then Inspect each one. Locks that end between the two
// steps are left out; the result is sorted by name.
func (d *redisDriver) List(ctx context.Context, prefix string) ([]driver.Holder, error) {
	names, err := d.scanNames(ctx, prefix)
	if err != nil {
		return nil, err
	}
	hs := make([]driver.Holder, 0, len(names))
	for _, name := range names {
		h, ok, err := d.Inspect(ctx, name)
		if err != nil {
			return nil, err
		}
		if ok {
			hs = append(hs, h)
		}
	}
	sort.Slice(hs, func(i, j int) bool { return hs[i].Name < hs[j].Name })
	return hs, nil
}

func (d *redisDriver) scanNames(ctx context.Context, prefix string) ([]string, error) {
	var mu sync.Mutex
	var names []string
	scan := func(ctx context.Context, c redis.Cmdable) error {
		it := c.Scan(ctx, 0, d.keys.Pattern(prefix), scanCount).Iterator()
		for it.Next(ctx) {
			if name, ok := d.keys.Name(it.Val()); ok {
				mu.Lock()
				names = append(names, name)
				mu.Unlock()
			}
		}
		return it.Err()
	}
	if cc, ok := d.client.(*redis.ClusterClient); ok {
		err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return scan(ctx, c) })
		return names, err
	}
	return names, scan(ctx, d.client)
}

// ForceRelease implements driver.ForceReleaser: one script deletes the
// lock whatever its token, bumps the fence and wakes the waiters; then an
// eviction of a held lock is announced on the eviction channel, where the
// evicted holder's Locker (WatchEvictions) learns of it at once.
func (d *redisDriver) ForceRelease(ctx context.Context, name string) (driver.Holder, bool, uint64, error) {
	keys := []string{d.keys.Lock(name), d.keys.Counter(name, d.cluster), d.keys.Queue(name), d.keys.LegacyFence(name), d.keys.Asks(name)}
	reply, err := forceReleaseScript.Run(ctx, d.client, keys, d.keys.Channel(name)).Slice()
	if err != nil {
		return driver.Holder{}, false, 0, rediscore.Classify(err)
	}
	if len(reply) != 3 {
		return driver.Holder{}, false, 0, fmt.Errorf("redislock: unexpected force-release reply %v", reply)
	}
	fence, err := parseFence(reply[2])
	if err != nil {
		return driver.Holder{}, false, 0, err
	}
	if raw, _ := reply[0].(string); raw == "" {
		return driver.Holder{}, false, fence, nil
	}
	h, ok, err := holderOf(name, reply[:2])
	if ok {
		d.publishEviction(ctx, name, h.Fence)
	}
	return h, ok, fence, err
}
