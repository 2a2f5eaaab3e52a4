package baseline

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/internal/benchwork"
	"github.com/dlockdev/dlock/pglock"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// PoolConns is each side's pool size when the URL sets no pool_max_conns:
// enough for 16 blocked waiters and 64 uncontended goroutines to share.
const PoolConns = 32

// Statements of the hand-written lease: one upsert that takes a free or
// expired name, its fence from a sequence, and a token-checked DELETE.
const (
	pgLeaseSchema = `CREATE TABLE IF NOT EXISTS dlock_bench_lease (
	name text PRIMARY KEY, token text NOT NULL, fence bigint NOT NULL, expires_at timestamptz NOT NULL);
CREATE SEQUENCE IF NOT EXISTS dlock_bench_fence`
	pgLeaseTake = `INSERT INTO dlock_bench_lease AS l (name, token, fence, expires_at)
VALUES ($1, $2, nextval('dlock_bench_fence'), now() + $3::bigint * interval '1 millisecond')
ON CONFLICT (name) DO UPDATE SET token = excluded.token, fence = excluded.fence, expires_at = excluded.expires_at
WHERE l.expires_at < now() RETURNING fence`
	pgLeaseDrop = `DELETE FROM dlock_bench_lease WHERE name = $1 AND token = $2`
)

// openPostgres compares pglock, in the URL's mode, with raw advisory
// locks or the hand-written upsert lease.
func openPostgres(ctx context.Context, u *url.URL, ttl time.Duration, opts []dlock.Option) (*Target, error) {
	cfg, pcfg, err := postgresURL(u)
	if err != nil {
		return nil, err
	}
	t := &Target{Backend: "postgres-lease",
		Baseline: "one-statement upsert lease (INSERT ... ON CONFLICT DO UPDATE WHERE expired RETURNING fence) + token-checked DELETE"}
	if cfg.Mode == pglock.Advisory {
		t.Backend = "postgres-advisory"
		t.Baseline = "pg_try_advisory_lock + pg_advisory_unlock on a pooled connection"
	}
	if err := t.postgresSides(ctx, cfg, pcfg, ttl, opts); err != nil {
		t.Close()
		return nil, err
	}
	t.statStatements(ctx, pcfg)
	return t, nil
}

// postgresURL takes pglock's keys (mode, table) out of the URL and gives
// the rest to pgx.
func postgresURL(u *url.URL) (pglock.Config, *pgxpool.Config, error) {
	q := u.Query()
	cfg := pglock.Config{Mode: pglock.Mode(q.Get("mode")), Table: q.Get("table")}
	if cfg.Mode != "" && cfg.Mode != pglock.Lease && cfg.Mode != pglock.Advisory {
		return cfg, nil, fmt.Errorf("%w: postgres URL query mode=%q: want %s or %s", dlock.ErrInvalidArgument, cfg.Mode, pglock.Lease, pglock.Advisory)
	}
	q.Del("mode")
	q.Del("table")
	sized := q.Has("pool_max_conns")
	v := *u
	v.RawQuery = q.Encode()
	pcfg, err := pgxpool.ParseConfig(v.String())
	if err != nil {
		return cfg, nil, fmt.Errorf("%w: postgres URL: %s", dlock.ErrInvalidArgument, scrubURLErr(err, u))
	}
	if !sized {
		pcfg.MaxConns = PoolConns
	}
	return cfg, pcfg, nil
}

// pool opens a pool of pcfg whose queries rt counts.
func (t *Target) pool(ctx context.Context, pcfg *pgxpool.Config, rt *Counter) (*pgxpool.Pool, error) {
	c := pcfg.Copy()
	c.ConnConfig.Tracer = pgTracer{rt}
	p, err := pgxpool.NewWithConfig(ctx, c)
	if err != nil {
		return nil, err
	}
	t.onClose(p.Close)
	if err := p.Ping(ctx); err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	return p, nil
}

func (t *Target) postgresSides(ctx context.Context, cfg pglock.Config, pcfg *pgxpool.Config, ttl time.Duration, opts []dlock.Option) error {
	drt, brt := &Counter{}, &Counter{}
	dp, err := t.pool(ctx, pcfg, drt)
	if err != nil {
		return err
	}
	t.NewLocker = func(o ...dlock.Option) (*dlock.Locker, error) { return cfg.Locker(dp, append(opts, o...)...) }
	if err := t.migratedDlockSide(ctx, drt); err != nil {
		return err
	}
	bp, err := t.pool(ctx, pcfg, brt)
	if err != nil {
		return err
	}
	if cfg.Mode == pglock.Advisory {
		a := pgAdvisory{bp}
		waits := append([]Contender{{Name: "blocking pg_advisory_lock", Contend: a.contend}}, polls(shared(a.attempt))...)
		t.Base = Side{Cycle: cycleOf(a.attempt), Contenders: waits, RoundTrips: brt}
		return nil
	}
	if _, err := bp.Exec(ctx, pgLeaseSchema); err != nil {
		return fmt.Errorf("create the baseline's lease table: %w", err)
	}
	mk := tokenAttempts(pgLease{bp, ttl.Milliseconds()})
	t.Base = Side{Cycle: cycleOf(mk), Contenders: polls(shared(mk)), RoundTrips: brt}
	return nil
}

// statStatements sets ServerTime from pg_stat_statements when the
// extension answers; otherwise it stays nil ("n/a").
func (t *Target) statStatements(ctx context.Context, pcfg *pgxpool.Config) {
	conn, err := pgx.ConnectConfig(ctx, pcfg.ConnConfig.Copy())
	if err != nil {
		return
	}
	t.onClose(func() { _ = conn.Close(context.Background()) })
	read := func(ctx context.Context) (time.Duration, error) {
		var ms float64
		err := conn.QueryRow(ctx, `SELECT coalesce(sum(total_exec_time), 0) FROM pg_stat_statements`).Scan(&ms)
		return time.Duration(ms * float64(time.Millisecond)), err
	}
	if _, err := read(ctx); err == nil {
		t.ServerTime, t.ServerTimeKind = read, "pg_stat_statements total_exec_time"
	}
}

// pgTracer counts every query, batch and copy as one round trip. It is no
// PrepareTracer: pgx prepares each statement once per connection (its
// statement cache), so prepares depend on when the pool opens
// connections, not on the lock; likewise connecting is not counted.
type pgTracer struct{ rt *Counter }

func (p pgTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	p.rt.Add(1)
	return ctx
}
func (pgTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (p pgTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	p.rt.Add(1)
	return ctx
}
func (pgTracer) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (pgTracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

func (p pgTracer) TraceCopyFromStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceCopyFromStartData) context.Context {
	p.rt.Add(1)
	return ctx
}
func (pgTracer) TraceCopyFromEnd(context.Context, *pgx.Conn, pgx.TraceCopyFromEndData) {}

// pgAdvisory is raw session advisory locks on a pool.
type pgAdvisory struct{ pool *pgxpool.Pool }

// attempt is one pg_try_advisory_lock on a pooled connection, kept until
// the unlock when it takes the lock.
func (a pgAdvisory) attempt(name string) attempt {
	key := pglock.Key(keyFor(name))
	return func(ctx context.Context) (func(context.Context) error, bool, error) {
		conn, err := a.pool.Acquire(ctx)
		if err != nil {
			return nil, false, err
		}
		var ok bool
		if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", key).Scan(&ok); err != nil || !ok {
			conn.Release()
			return nil, false, err
		}
		return func(ctx context.Context) error {
			defer conn.Release()
			_, err := conn.Exec(ctx, "SELECT pg_advisory_unlock($1)", key)
			return err
		}, true, nil
	}
}

// contend blocks in the server: pg_advisory_lock on a pooled connection
// kept until the unlock.
func (a pgAdvisory) contend(_ context.Context, _ int, name string) (benchwork.Lock, func(), error) {
	key := pglock.Key(keyFor(name))
	return func(ctx context.Context, _ int) (func(context.Context) error, error) {
		conn, err := a.pool.Acquire(ctx)
		if err != nil {
			return nil, err
		}
		if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", key); err != nil {
			conn.Release()
			return nil, err
		}
		return func(ctx context.Context) error {
			defer conn.Release()
			_, err := conn.Exec(ctx, "SELECT pg_advisory_unlock($1)", key)
			return err
		}, nil
	}, func() {}, nil
}

// pgLease is the hand-written upsert lease.
type pgLease struct {
	pool  *pgxpool.Pool
	ttlMs int64
}

// try runs the upsert; no row back means the name is held.
func (l pgLease) try(ctx context.Context, name, tok string) (bool, error) {
	var fence int64
	err := l.pool.QueryRow(ctx, pgLeaseTake, name, tok, l.ttlMs).Scan(&fence)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

func (l pgLease) drop(ctx context.Context, name, tok string) error {
	_, err := l.pool.Exec(ctx, pgLeaseDrop, name, tok)
	return err
}
