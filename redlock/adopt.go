package redlock

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/internal/rediscore"
)

var _ driver.Adopter = (*redlock)(nil)

// Adopt extends the lock on every node where req.Token still holds it,
// as Refresh does, and succeeds when a majority confirmed in time. The
// grant wrote its fence into the lock's value on a majority, which meets
// every majority that confirms: fence is borne out when a confirming node
// holds it. Other nodes may hold another value (a phase-1 counter that
// phase 2 did not reach), so fence is all Adopt can check; when no
// confirming node holds it, the highest value found is returned.
func (d *redlock) Adopt(ctx context.Context, req driver.Request, want uint64) (driver.Grant, error) {
	start := time.Now()
	ms := req.TTL.Milliseconds()
	var (
		mu    sync.Mutex
		fence uint64
		seen  bool
	)
	t := d.ask(ctx, min(d.cfg.nodeTimeout, req.TTL), 0, func(ctx context.Context, i int) (int64, error) {
		reply, err := rediscore.Adopt.Run(ctx, d.nodes[i].client, []string{layout.Lock(req.Name)}, anyAttempt(req.Token), ms).Result()
		if err != nil {
			return 0, err
		}
		v, code, err := rediscore.Adopted(reply)
		if err == nil && code == codeDone {
			mu.Lock()
			fence, seen = max(fence, v.Fence), seen || v.Fence == want
			mu.Unlock()
		}
		return code, err
	})
	if err := t.outcome("adopt", len(d.nodes), d.quorum); err != nil {
		return driver.Grant{}, err
	}
	if took := time.Since(start); took >= req.TTL-driver.ClockDrift(req.TTL) {
		return driver.Grant{}, fmt.Errorf("redlock: adoption confirmed after %s, past its %s TTL", took.Round(time.Millisecond), req.TTL)
	}
	mu.Lock()
	defer mu.Unlock()
	if seen {
		fence = want
	}
	return driver.Grant{Acquired: true, Fence: fence}, nil
}
