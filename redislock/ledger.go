package redislock

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/internal/rediscore"
	"github.com/redis/go-redis/v9"
)

// The run ledger (driver.Ledger): a name's runs live beside its lock, in
// the same hash slot, at prefix{name}:runs and prefix{name}:runs:slots
// (rediscore.Keys.Runs). Each write is one fenced script; under
// Config.ReplicaSync it counts only once WAIT confirms the replicas have
// it, as a grant does.

var _ driver.Ledger = (*redisDriver)(nil)

// claimed is the claim-run script's answer.
type claimed struct {
	code int64
	rec  driver.RunRecord
}

// ClaimRun implements driver.Ledger with the claim-run script: fenced,
// atomic, and dropping the slots beyond the newest keep.
func (d *redisDriver) ClaimRun(ctx context.Context, rec driver.RunRecord, rerun bool, keep int) (driver.RunRecord, bool, error) {
	w, err := rediscore.ClaimWrite(d.keys, rec, rerun, keep)
	if err != nil {
		return driver.RunRecord{}, false, err
	}
	c, err := bounded(ctx, d, func() (claimed, error) {
		var c claimed
		err := d.ledgerWrite(ctx, rec.Name, "claim of a run of "+strconv.Quote(rec.Name), func(s redis.Scripter) error {
			var err error
			c.code, c.rec, err = w.Claim(ctx, s)
			return err
		})
		return c, err
	})
	switch {
	case err != nil:
		return driver.RunRecord{}, false, err
	case c.code == rediscore.RunRefused:
		return driver.RunRecord{}, false, fmt.Errorf("redislock: %w", rediscore.Refused(rec))
	}
	return c.rec, c.code == rediscore.RunWritten, nil
}

// FinishRun implements driver.Ledger with the finish-run script.
func (d *redisDriver) FinishRun(ctx context.Context, rec driver.RunRecord) error {
	w, err := rediscore.FinishWrite(d.keys, rec)
	if err != nil {
		return err
	}
	code, err := bounded(ctx, d, func() (int64, error) {
		var code int64
		err := d.ledgerWrite(ctx, rec.Name, "outcome of a run of "+strconv.Quote(rec.Name), func(s redis.Scripter) error {
			var err error
			code, err = w.Finish(ctx, s)
			return err
		})
		return code, err
	})
	switch {
	case err != nil:
		return err
	case code == rediscore.RunRefused:
		return fmt.Errorf("redislock: %w", rediscore.Refused(rec))
	case code != rediscore.RunWritten:
		return fmt.Errorf("redislock: run ledger of %q has no run of slot %s under fence %d (dropped, or run again): %w",
			rec.Name, rec.Slot.UTC().Format(time.RFC3339Nano), rec.Fence, driver.ErrNotHeld)
	}
	return nil
}

// Runs implements driver.Ledger: one HGETALL of the name's ledger.
func (d *redisDriver) Runs(ctx context.Context, name string) ([]driver.RunRecord, error) {
	return bounded(ctx, d, func() ([]driver.RunRecord, error) {
		return rediscore.ReadRuns(ctx, d.client, d.keys, name)
	})
}

// ledgerWrite runs fn on the client or, under Config.ReplicaSync, on one
// connection to the name's primary followed by WAIT: the write counts
// only once the replicas confirm it, so that a failover cannot forget a
// claim and run the slot again.
func (d *redisDriver) ledgerWrite(ctx context.Context, name, what string, fn func(redis.Scripter) error) error {
	if d.cfg.replicas == 0 {
		return fn(d.client)
	}
	return d.synced(ctx, d.keys.Runs(name), what, func(c *redis.Conn) error { return fn(c) })
}
