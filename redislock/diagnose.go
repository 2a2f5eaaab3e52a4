package redislock

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/dlockdev/dlock/driver"
	"github.com/redis/go-redis/v9"
)

// Diagnose implements driver.Diagnoser (dlock doctor). It reads, on the
// server (on every primary of a Cluster): persistence, eviction,
// replication, cluster mode and the server version, plus whether the
// client honours context deadlines. It never changes anything.
func (d *redisDriver) Diagnose(ctx context.Context) ([]driver.Finding, error) {
	var mu sync.Mutex
	var out []driver.Finding
	check := func(ctx context.Context, c redis.Cmdable, addr string) error {
		fs, err := d.diagnoseNode(ctx, c)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		for _, f := range fs {
			if addr != "" {
				f.Detail = addr + ": " + f.Detail
			}
			out = append(out, f)
		}
		return nil
	}
	var err error
	if cc, ok := d.client.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			return check(ctx, c, c.Options().Addr)
		})
	} else {
		err = check(ctx, d.client, "")
	}
	if err != nil {
		return nil, err
	}
	return append(out, d.clientFinding()), nil
}

func (d *redisDriver) diagnoseNode(ctx context.Context, c redis.Cmdable) ([]driver.Finding, error) {
	info, err := c.Info(ctx, "server", "replication", "cluster").Result()
	if err != nil {
		return nil, err
	}
	kv := parseInfo(info)
	fs := []driver.Finding{versionFinding(kv["redis_version"])}
	conf, cerr := c.ConfigGet(ctx, "*").Result()
	if cerr != nil {
		fs = append(fs, driver.Finding{Check: "redis configuration", Verdict: driver.VerdictWarn,
			Detail: "CONFIG GET refused (" + cerr.Error() + "): persistence and eviction not checked",
			Fix:    "run dlock doctor as a user allowed CONFIG GET, or check appendonly, appendfsync and maxmemory-policy by hand"})
	} else {
		fs = append(fs, persistenceFinding(conf), evictionFinding(conf))
	}
	fs = append(fs, d.replicationFinding(kv), clusterFinding(kv))
	return fs, nil
}

// parseInfo reads INFO's key:value lines.
func parseInfo(info string) map[string]string {
	kv := map[string]string{}
	for _, line := range strings.Split(info, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			kv[k] = v
		}
	}
	return kv
}

// versionFinding: the acquire script needs SET ... GET (Redis 6.2).
func versionFinding(v string) driver.Finding {
	f := driver.Finding{Check: "redis version", Verdict: driver.VerdictOK, Detail: "redis_version " + v}
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		f.Verdict, f.Fix = driver.VerdictWarn, "could not read the version; dlock needs Redis 6.2 or later"
		return f
	}
	major, _ := strconv.Atoi(parts[0])
	minor, _ := strconv.Atoi(parts[1])
	if major < 6 || (major == 6 && minor < 2) {
		f.Verdict, f.Fix = driver.VerdictUnsafe, "upgrade to Redis 6.2 or later: the acquire script uses SET ... GET"
	}
	return f
}

// persistenceFinding: what a restart keeps. Without an append-only file a
// restart forgets every held lock (a second holder can then acquire);
// fences still rise, floored at the server clock. With appendfsync
// everysec a crash can lose about a second of grants; with always, none.
func persistenceFinding(conf map[string]string) driver.Finding {
	aof, fsync, save := conf["appendonly"], conf["appendfsync"], conf["save"]
	f := driver.Finding{Check: "redis persistence",
		Detail: fmt.Sprintf("appendonly %s, appendfsync %s, save %q", aof, fsync, save)}
	switch {
	case aof != "yes":
		f.Verdict = driver.VerdictUnsafe
		f.Detail += ": a restart forgets held locks (RDB snapshots are minutes old), so a second holder can acquire; fences still rise (server-clock floor)"
		f.Fix = "appendonly yes with appendfsync always; or treat locks as efficiency locks and fence every write"
	case fsync == "always":
		f.Verdict = driver.VerdictOK
	default:
		f.Verdict = driver.VerdictWarn
		f.Detail += ": a crash (not a clean restart) can lose the last grants (about 1 s with everysec, more with no)"
		f.Fix = "appendfsync always, if a double grant after a server crash matters; fences still rise either way"
	}
	return f
}

// evictionFinding: lock keys carry a TTL, so every volatile-* policy may
// evict them, as may every allkeys-* policy (which may also evict the
// fence counter). Only noeviction (writes fail when memory is full:
// acquires error out) or no memory limit keeps them.
func evictionFinding(conf map[string]string) driver.Finding {
	policy, limit := conf["maxmemory-policy"], conf["maxmemory"]
	f := driver.Finding{Check: "redis eviction", Verdict: driver.VerdictOK,
		Detail: fmt.Sprintf("maxmemory %s, maxmemory-policy %s", limit, policy)}
	switch {
	case policy == "noeviction":
	case limit == "0":
		f.Verdict = driver.VerdictWarn
		f.Detail += ": no memory limit now, but setting one would let Redis evict lock keys"
		f.Fix = "maxmemory-policy noeviction"
	default:
		f.Verdict = driver.VerdictUnsafe
		f.Detail += ": when memory is full Redis may evict a held lock's key (lock keys have a TTL, so volatile-* policies pick them too), and another holder can acquire"
		f.Fix = "maxmemory-policy noeviction (or a separate Redis for locks)"
	}
	return f
}

// replicationFinding: replicas are copied asynchronously; without
// replica_sync a failover can promote one that never saw a grant.
func (d *redisDriver) replicationFinding(kv map[string]string) driver.Finding {
	n, _ := strconv.Atoi(kv["connected_slaves"])
	f := driver.Finding{Check: "redis replication", Verdict: driver.VerdictOK,
		Detail: fmt.Sprintf("role %s, %d connected replicas, replica_sync %d", kv["role"], n, d.cfg.replicas)}
	switch {
	case kv["role"] == "slave":
		f.Verdict = driver.VerdictUnsafe
		f.Detail += ": connected to a replica, which refuses writes"
		f.Fix = "point the URL at the primary (or use Sentinel / Cluster addresses)"
	case d.cfg.replicas > n:
		f.Verdict = driver.VerdictUnsafe
		f.Detail += ": fewer replicas than replica_sync asks for, so every grant is refused"
		f.Fix = fmt.Sprintf("replica_sync=%d or fewer, or attach more replicas", n)
	case n > 0 && d.cfg.replicas == 0:
		f.Verdict = driver.VerdictWarn
		f.Detail += ": a failover can promote a replica that never received a grant, and a second holder acquires"
		f.Fix = fmt.Sprintf("replica_sync=%d (WAIT on every grant and refresh)", n)
	}
	return f
}

// clusterFinding: each Cluster shard fails over on its own, like a
// replicated primary.
func clusterFinding(kv map[string]string) driver.Finding {
	f := driver.Finding{Check: "redis cluster mode", Verdict: driver.VerdictOK, Detail: "cluster_enabled " + kv["cluster_enabled"]}
	if kv["cluster_enabled"] == "1" {
		f.Verdict = driver.VerdictWarn
		f.Detail += ": each shard replicates asynchronously and fails over on its own; fences are per hash slot"
		f.Fix = "replica_sync=1 or more, so that a shard failover cannot lose a grant"
	}
	return f
}

// clientFinding: without ContextTimeoutEnabled go-redis waits out its own
// read timeout and retries, not the caller's deadline.
func (d *redisDriver) clientFinding() driver.Finding {
	on := true
	switch c := d.client.(type) {
	case *redis.Client:
		on = c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		on = c.Options().ContextTimeoutEnabled
	}
	f := driver.Finding{Check: "redis client deadlines", Verdict: driver.VerdictOK, Detail: fmt.Sprintf("ContextTimeoutEnabled %v", on)}
	if !on {
		f.Verdict = driver.VerdictWarn
		f.Detail += ": a stalled server holds each call for the client's read timeout and retries, past the caller's deadline"
		f.Fix = "set ContextTimeoutEnabled: true on the go-redis client (Open's clients have it)"
	}
	return f
}
