package filelock

import (
	"context"
	"database/sql"
	"time"

	"github.com/dlockdev/dlock/driver"
)

var _ driver.EvictionWatcher = (*fileDriver)(nil)

// A force-release records its eviction (the evicted grant's name and
// fence) in dlock_evictions, in the transaction that evicts; every
// process's watcher polls that table while one of its Lockers holds
// leases (the portable layer watches evictions then), every evictPoll, or
// faster while it also polls for waiters, and hands each new row to its
// eviction watchers. A force-release through this store is handed to them
// at once as well. The rows are kept for evictionAge: a process that polls
// later than that (paused, or not holding anything) learns of an eviction
// at its holder's next refresh, as it did without the table.
//
// A first eviction watcher starts with the records of the last
// evictionLookback: the portable layer subscribes in the background when
// a Locker's first lease starts, so a force-release right after the grant
// may be recorded before the subscription; it is delivered all the same.
// Delivering an older eviction is harmless: it names a grant (name and
// fence) that is no longer live anywhere.
const (
	evictPoll        = 50 * time.Millisecond
	evictionAge      = 10 * time.Minute
	evictionLookback = time.Minute
)

// evictionBuffer is how many evictions a watcher's channel holds; more are
// dropped for that watcher (its holders learn at their next refresh).
const evictionBuffer = 64

const recordEvictionSQL = `INSERT INTO dlock_evictions (name, fence, at) VALUES (?1, ?2, ` + nowMS + `)`

const pruneEvictionsSQL = `DELETE FROM dlock_evictions WHERE at < ` + nowMS + ` - ?1`

const evictionsSQL = `SELECT seq, name, fence FROM dlock_evictions WHERE seq > ?1 ORDER BY seq`

// lastEvictionSQL is where a first eviction watcher starts: the last
// record older than ?1 ms (evictionLookback).
const lastEvictionSQL = `SELECT coalesce(max(seq), 0) FROM dlock_evictions WHERE at < ` + nowMS + ` - ?1`

// WatchEvictions implements driver.EvictionWatcher: the force-releases of
// this file's locks, by any process, reach ch within evictPoll or so
// (while the watcher polls), and at once when made through this store.
// A force-release committed after it returns is delivered, and so are
// those of the last evictionLookback.
func (d *fileDriver) WatchEvictions(ctx context.Context) (<-chan driver.Eviction, func(), error) {
	return d.watch.addEvictions(ctx)
}

// recordEviction writes e in tx, the force-release's, and drops the
// records older than evictionAge.
func recordEviction(ctx context.Context, tx *sql.Tx, e driver.Eviction) error {
	if _, err := tx.ExecContext(ctx, pruneEvictionsSQL, evictionAge.Milliseconds()); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, recordEvictionSQL, e.Name, int64(e.Fence))
	return err
}

func (w *watcher) addEvictions(ctx context.Context) (<-chan driver.Eviction, func(), error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	forWaitersAlone := w.running && len(w.evicts) == 0
	if err := w.ensure(ctx); err != nil {
		return nil, nil, err
	}
	if forWaitersAlone { // it did not follow evictions (a new one read where to start)
		if err := w.poll.QueryRowContext(ctx, lastEvictionSQL, evictionLookback.Milliseconds()).Scan(&w.evLast); err != nil {
			return nil, nil, err
		}
	}
	ch := make(chan driver.Eviction, evictionBuffer)
	w.evicts[ch] = struct{}{}
	stop := func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.evicts, ch)
		w.stopIfIdle()
	}
	return ch, stop, nil
}

// evicted hands e to every eviction watcher, without blocking; w.mu is
// held. A watcher may get an eviction twice (from this store and from a
// poll): the portable layer ends only a live lease.
func (w *watcher) evicted(e driver.Eviction) {
	for ch := range w.evicts {
		select {
		case ch <- e:
		default:
		}
	}
}

// forceReleased hands an eviction made through this store to the
// eviction watchers at once.
func (w *watcher) forceReleased(e driver.Eviction) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.evicted(e)
}

// checkEvictions hands the evictions recorded since the last look to the
// eviction watchers. A failed poll is tried again at the next tick.
func (w *watcher) checkEvictions(ctx context.Context) {
	w.mu.Lock()
	last, stmt := w.evLast, w.evictions
	w.mu.Unlock()
	es, seq, err := evictionsSince(ctx, stmt, last)
	if err != nil || len(es) == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if seq <= w.evLast { // a new first watcher re-read the sequence meanwhile
		return
	}
	for _, e := range es {
		w.evicted(e)
	}
	w.evLast = seq
}

func evictionsSince(ctx context.Context, stmt *sql.Stmt, last int64) (es []driver.Eviction, seq int64, err error) {
	rows, err := stmt.QueryContext(ctx, last)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	for rows.Next() {
		var e driver.Eviction
		var fence int64
		if err := rows.Scan(&seq, &e.Name, &fence); err != nil {
			return nil, 0, err
		}
		e.Fence = uint64(fence)
		es = append(es, e)
	}
	return es, seq, rows.Err()
}
