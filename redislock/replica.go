package redislock

import (
	"context"
	"fmt"

	"github.com/dlockdev/dlock/driver"
	"github.com/redis/go-redis/v9"
)

// acquireSynced is TryAcquire under Config.ReplicaSync: the script and WAIT
// run on one connection (WAIT counts the replicas that have this
// connection's writes), and a grant that too few replicas confirmed is
// released on that connection before the error is returned.
func (d *redisDriver) acquireSynced(ctx context.Context, req driver.Request, q queuing) (driver.Grant, uint64, error) {
	node, err := d.primaryFor(ctx, d.keys.Lock(req.Name))
	if err != nil {
		return driver.Grant{}, 0, err
	}
	conn := node.Conn()
	defer conn.Close()
	g, us, err := d.acquire(ctx, conn, req, q)
	if err != nil || !g.Acquired {
		return g, us, err
	}
	n, err := conn.Wait(ctx, d.cfg.replicas, d.cfg.replicaTimeout).Result()
	if err == nil && n >= int64(d.cfg.replicas) {
		return g, us, nil
	}
	d.background(ctx, func(ctx context.Context) { _ = d.release(ctx, d.client, req.Name, req.Token) })
	if err != nil {
		return driver.Grant{}, 0, fmt.Errorf("redislock: WAIT for %d replicas: %w", d.cfg.replicas, err)
	}
	return driver.Grant{}, 0, fmt.Errorf("redislock: grant of %q reached %d of %d replicas within %s; released it",
		req.Name, n, d.cfg.replicas, d.cfg.replicaTimeout)
}

// primaryFor returns the client of the primary that owns key.
func (d *redisDriver) primaryFor(ctx context.Context, key string) (*redis.Client, error) {
	switch c := d.client.(type) {
	case *redis.Client:
		return c, nil
	case *redis.ClusterClient:
		return c.MasterForKey(ctx, key)
	default:
		return nil, fmt.Errorf("redislock: Config.ReplicaSync (replica_sync) needs a *redis.Client or *redis.ClusterClient, not %T", d.client)
	}
}

// errUnconfirmed reports a refresh that too few replicas confirmed. It is
// not driver.ErrNotHeld: the lease may well be held, but the promise of
// Config.ReplicaSync (a failover cannot lose it) is not kept, so the
// watchdog must count the refresh as failed and try again, and declare
// the lease lost if no refresh is confirmed in time.
func (d *redisDriver) errUnconfirmed(what string, n int64, err error) error {
	if err != nil {
		return fmt.Errorf("redislock: %s: WAIT for %d replicas: %w", what, d.cfg.replicas, err)
	}
	return fmt.Errorf("redislock: %s reached %d of %d replicas within %s", what, n, d.cfg.replicas, d.cfg.replicaTimeout)
}

// synced runs fn on one connection to the primary that owns key, then
// WAIT on that connection; it fails unless fn succeeded and the replicas
// confirmed its writes.
func (d *redisDriver) synced(ctx context.Context, key, what string, fn func(c *redis.Conn) error) error {
	node, err := d.primaryFor(ctx, key)
	if err != nil {
		return err
	}
	conn := node.Conn()
	defer conn.Close()
	if err := fn(conn); err != nil {
		return err
	}
	n, err := conn.Wait(ctx, d.cfg.replicas, d.cfg.replicaTimeout).Result()
	if err != nil || n < int64(d.cfg.replicas) {
		return d.errUnconfirmed(what, n, err)
	}
	return nil
}
