package redislock

import (
	"context"
	"errors"
	"strconv"

	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/internal/rediscore"
	"github.com/redis/go-redis/v9"
)

var _ driver.Adopter = (*redisDriver)(nil)

// Adopt runs the adopt script: the refresh script's token-checked
// extension, answering the lock's value, whose fence the lease keeps.
// Under Config.ReplicaSync it counts only once WAIT confirms it, as a
// refresh does.
func (d *redisDriver) Adopt(ctx context.Context, req driver.Request, _ uint64) (driver.Grant, error) {
	return bounded(ctx, d, func() (driver.Grant, error) { return d.adoptOnce(ctx, req) })
}

func (d *redisDriver) adoptOnce(ctx context.Context, req driver.Request) (driver.Grant, error) {
	if d.cfg.replicas == 0 {
		return d.adopt(ctx, d.client, req)
	}
	var g driver.Grant
	var held error
	err := d.synced(ctx, d.keys.Lock(req.Name), "adoption of "+strconv.Quote(req.Name), func(c *redis.Conn) error {
		g, held = d.adopt(ctx, c, req)
		if errors.Is(held, driver.ErrNotHeld) {
			return nil // nothing to confirm: report the loss itself
		}
		return held
	})
	if err != nil {
		return driver.Grant{}, err
	}
	return g, held
}

func (d *redisDriver) adopt(ctx context.Context, c redis.Scripter, req driver.Request) (driver.Grant, error) {
	reply, err := rediscore.Adopt.Run(ctx, c, []string{d.keys.Lock(req.Name)}, rediscore.Mark(req.Token), ttlMillis(req.TTL)).Result()
	if err != nil {
		return driver.Grant{}, rediscore.Classify(err)
	}
	v, code, err := rediscore.Adopted(reply)
	if err != nil {
		return driver.Grant{}, err
	}
	if code != 1 {
		return driver.Grant{}, outcome(code)
	}
	return driver.Grant{Acquired: true, Fence: v.Fence}, nil
}
