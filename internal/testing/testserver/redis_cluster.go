package testserver

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisClusterServer is a Redis Cluster of masters without replicas, each
// a RedisServer on a free loopback port, stopped in t.Cleanup.
type RedisClusterServer struct {
	// Addrs are the masters' host:port addresses.
	Addrs []string
	// Nodes are the masters, in the order of Addrs.
	Nodes []*RedisServer
}

// clusterSlots is the number of hash slots in Redis Cluster.
const clusterSlots = 16384

// RedisCluster starts masters redis-servers in cluster mode, splits the
// hash slots evenly between them, joins them and waits until every node
// reports cluster_state:ok.
func RedisCluster(t testing.TB, masters int) *RedisClusterServer {
	t.Helper()
	if masters < 1 {
		t.Fatalf("RedisCluster: masters = %d, want at least 1", masters)
	}
	c := &RedisClusterServer{}
	for range masters {
		n := Redis(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "5000")
		c.Nodes = append(c.Nodes, n)
		c.Addrs = append(c.Addrs, n.Addr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.form(ctx); err != nil {
		t.Fatalf("RedisCluster: %v", err)
	}
	return c
}

// URL returns a go-redis cluster URL naming every master:
// "redis://h1:p1?addr=h2:p2&addr=h3:p3".
func (c *RedisClusterServer) URL() string {
	u := "redis://" + c.Addrs[0]
	for i, a := range c.Addrs[1:] {
		sep := "&"
		if i == 0 {
			sep = "?"
		}
		u += sep + "addr=" + a
	}
	return u
}

func (c *RedisClusterServer) form(ctx context.Context) error {
	for i, addr := range c.Addrs {
		from, to := i*clusterSlots/len(c.Addrs), (i+1)*clusterSlots/len(c.Addrs)-1
		if err := nodeDo(ctx, addr, "cluster", "addslotsrange", from, to); err != nil {
			return err
		}
	}
	for _, n := range c.Nodes[1:] {
		if err := nodeDo(ctx, c.Addrs[0], "cluster", "meet", "127.0.0.1", n.Port); err != nil {
			return err
		}
	}
	for _, addr := range c.Addrs {
		if err := waitClusterOK(ctx, addr, len(c.Addrs)); err != nil {
			return err
		}
	}
	return nil
}

func nodeDo(ctx context.Context, addr string, args ...any) error {
	rc := redis.NewClient(&redis.Options{Addr: addr})
	defer rc.Close()
	if err := rc.Do(ctx, args...).Err(); err != nil {
		return fmt.Errorf("%s: %v: %w", addr, args, err)
	}
	return nil
}

func waitClusterOK(ctx context.Context, addr string, nodes int) error {
	rc := redis.NewClient(&redis.Options{Addr: addr})
	defer rc.Close()
	want := []string{"cluster_state:ok", fmt.Sprintf("cluster_known_nodes:%d", nodes)}
	for {
		info, err := rc.ClusterInfo(ctx).Result()
		if err == nil && strings.Contains(info, want[0]) && strings.Contains(info, want[1]) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s never reached %v (last: %v %q)", addr, want, err, info)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
