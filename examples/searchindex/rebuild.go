package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// lockName is the one lock every rebuilder in the fleet takes.
const lockName = "search-index/rebuild"

// batch is how many products one INSERT indexes.
const batch = 10

type rebuilder struct {
	db     *pgxpool.Pool
	locker *dlock.Locker
	slow   time.Duration
	out    io.Writer

	mu sync.Mutex // serialises writes to out
	wg sync.WaitGroup
}

func (r *rebuilder) printf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(r.out, format+"\n", args...)
}

// running describes the rebuild in progress, for a refused caller.
type running struct {
	Owner     string    `json:"owner"`
	Fence     uint64    `json:"fence"`
	StartedAt time.Time `json:"started_at"`
}

// start takes the lock without waiting (or up to wait) and records the
// run. A held lock yields a *running describing the holder.
func (r *rebuilder) start(ctx context.Context, wait time.Duration) (*dlock.Lease, time.Time, *running, error) {
	lease, err := r.locker.Acquire(ctx, lockName, dlock.WithWait(wait))
	var held *dlock.HeldError
	if errors.As(err, &held) {
		return nil, time.Time{}, r.describe(ctx, held.Holder), nil
	}
	if err != nil {
		return nil, time.Time{}, nil, err
	}
	var started time.Time
	err = r.db.QueryRow(ctx, `INSERT INTO rebuild_runs (fence, owner) VALUES ($1, $2) RETURNING started_at`,
		int64(lease.Fence()), lease.Owner()).Scan(&started)
	if err != nil {
		lease.Release(context.Background())
		return nil, time.Time{}, nil, err
	}
	return lease, started, nil, nil
}

// describe completes what the lock knows of its holder with the start
// time the holder recorded.
func (r *rebuilder) describe(ctx context.Context, h dlock.Holder) *running {
	run := &running{Owner: h.Owner, Fence: h.Fence}
	_ = r.db.QueryRow(ctx, `SELECT started_at FROM rebuild_runs WHERE fence = $1`, int64(h.Fence)).Scan(&run.StartedAt)
	return run
}

// once is the cron entry point: one rebuild, or exit 75 if one is running.
func (r *rebuilder) once(ctx context.Context, wait time.Duration) int {
	lease, _, held, err := r.start(ctx, wait)
	if err != nil {
		return exit(err)
	}
	if held != nil {
		fmt.Fprintf(os.Stderr, "searchindex: a rebuild is already running: %s (fence %d) since %s\n",
			held.Owner, held.Fence, held.StartedAt.Format(time.RFC3339))
		return exitHeld
	}
	return exit(r.rebuild(ctx, lease))
}

// rebuild builds a new index under lease and swaps it in; it releases
// the lease. Work stops as soon as the lease is lost (lease.Context).
func (r *rebuilder) rebuild(ctx context.Context, lease *dlock.Lease) error {
	defer lease.Release(context.Background())
	ctx = lease.Context(ctx)
	if err := r.dropLeftovers(ctx); err != nil {
		return err
	}
	tmp := "idx_tmp_" + randomHex()
	if err := r.build(ctx, tmp, lease.Fence()); err != nil {
		return fmt.Errorf("build %s: %w", tmp, errors.Join(err, context.Cause(ctx)))
	}
	if err := r.swap(ctx, tmp); err != nil {
		return err
	}
	_, err := r.db.Exec(ctx, `UPDATE rebuild_runs SET finished_at = now() WHERE fence = $1`, int64(lease.Fence()))
	r.printf("promoted %s to search_index (generation %d)", tmp, lease.Fence())
	return err
}

func randomHex() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// dropLeftovers removes temporary tables of crashed rebuilds. Only the
// lock holder builds, so any idx_tmp_ table seen now is abandoned.
func (r *rebuilder) dropLeftovers(ctx context.Context) error {
	rows, err := r.db.Query(ctx, `SELECT tablename FROM pg_tables WHERE schemaname = current_schema() AND tablename LIKE 'idx\_tmp\_%'`)
	if err != nil {
		return err
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	for _, n := range names {
		r.printf("dropping leftover %s", n)
		if _, err := r.db.Exec(ctx, "DROP TABLE IF EXISTS "+pgx.Identifier{n}.Sanitize()); err != nil {
			return err
		}
	}
	return nil
}

// build fills a fresh table in batches; a crash leaves only that table.
func (r *rebuilder) build(ctx context.Context, tmp string, gen uint64) error {
	t := pgx.Identifier{tmp}.Sanitize()
	_, err := r.db.Exec(ctx, `CREATE TABLE `+t+` (product_id int PRIMARY KEY, document tsvector NOT NULL, generation bigint NOT NULL)`)
	if err != nil {
		return err
	}
	var n int
	if err := r.db.QueryRow(ctx, `SELECT coalesce(max(id), 0) FROM products`).Scan(&n); err != nil {
		return err
	}
	for lo := 0; lo < n; lo += batch {
		_, err := r.db.Exec(ctx, `INSERT INTO `+t+` SELECT id, to_tsvector('simple', name), $3 FROM products WHERE id > $1 AND id <= $2`,
			lo, lo+batch, int64(gen))
		if err != nil {
			return err
		}
		r.printf("building %s: %d/%d", tmp, min(lo+batch, n), n)
		if err := sleep(ctx, r.slow); err != nil {
			return err
		}
	}
	_, err = r.db.Exec(ctx, `CREATE INDEX `+pgx.Identifier{tmp + "_doc"}.Sanitize()+` ON `+t+` USING gin (document)`)
	return err
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// swap promotes tmp to search_index in one transaction: readers see the
// old index or the new one, never a half-built one.
func (r *rebuilder) swap(ctx context.Context, tmp string) error {
	old := pgx.Identifier{"idx_old_" + randomHex()}.Sanitize()
	return pgx.BeginFunc(ctx, r.db, func(tx pgx.Tx) error {
		for _, sql := range []string{
			`ALTER TABLE IF EXISTS search_index RENAME TO ` + old,
			`ALTER TABLE ` + pgx.Identifier{tmp}.Sanitize() + ` RENAME TO search_index`,
			`DROP TABLE IF EXISTS ` + old,
		} {
			if _, err := tx.Exec(ctx, sql); err != nil {
				return err
			}
		}
		return nil
	})
}
