package filelock

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/dlockdev/dlock/driver"
)

// prunable selects the rows of names nobody has held since the cutoff ?1
// (a release or expiry at or before it: a live lease expires after now),
// except the row carrying the largest release sequence number, which
// keeps that sequence from going back for the watchers.
const prunable = `expires_at <= ?1 AND (freed = 0 OR freed < (SELECT max(freed) FROM dlock_leases))`

// raiseFloorSQL lifts the fence floor to the highest fence among the rows
// pruneSQL then deletes in the same transaction, with the same cutoff.
const raiseFloorSQL = `UPDATE dlock_fence_floor
SET fence = max(fence, coalesce((SELECT max(fence) FROM dlock_leases WHERE ` + prunable + `), 0))
WHERE id = 1`

const pruneSQL = `DELETE FROM dlock_leases WHERE ` + prunable

// maxPruneEvery bounds how long the rows of names no longer held may
// outlive the retention.
const maxPruneEvery = time.Minute

// pruner decides when a store prunes: at most once per every, during a
// release. The rows a process leaves behind are bounded by the names
// released within retention plus every.
type pruner struct {
	retention time.Duration
	every     time.Duration
	due       atomic.Int64 // Unix nanoseconds
}

func newPruner(retention time.Duration) pruner {
	return pruner{retention: retention, every: min(retention/4, maxPruneEvery)}
}

// claim reports whether a prune is due now, and if so makes the next one
// due after every; one caller wins each turn.
func (p *pruner) claim(now time.Time) bool {
	due := p.due.Load()
	return now.UnixNano() >= due && p.due.CompareAndSwap(due, now.Add(p.every).UnixNano())
}

// maybePrune prunes when due. A failure is logged, not returned: the
// release that triggered it succeeded, and the next one tries again.
func (d *fileDriver) maybePrune(ctx context.Context) {
	now := time.Now()
	if !d.prune.claim(now) {
		return
	}
	if _, err := d.pruneRows(ctx, now.Add(-d.prune.retention)); err != nil {
		driver.LoggerFrom(ctx).Warn("dlock: filelock: pruning old lock rows failed; retrying at the next release", "err", err)
	}
}

// pruneRows deletes the rows of names not held since cutoff, first raising
// the fence floor above their fences, in one write transaction.
func (d *fileDriver) pruneRows(ctx context.Context, cutoff time.Time) (int64, error) {
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	ms := cutoff.UnixMilli()
	res, err := tx.ExecContext(ctx, raiseFloorSQL, ms)
	if err != nil {
		return 0, err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return 0, fmt.Errorf("filelock: fence floor row missing (%d rows, %v): not pruning, which would let fences go back", n, err)
	}
	if res, err = tx.ExecContext(ctx, pruneSQL, ms); err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, err
	}
	return n, tx.Commit()
}
