package baseline

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/mysqllock"
	"github.com/go-sql-driver/mysql"
)

// MySQLIdleConns is the idle connections each side's pool keeps: enough
// for 64 uncontended goroutines, or 16 waiters and a holder, to reuse
// theirs (database/sql's default of 2 would reconnect on most cycles).
const MySQLIdleConns = 96

// openMySQL compares mysqllock, in the URL's mode, with GET_LOCK and
// RELEASE_LOCK on a pinned connection or the hand-written upsert lease.
func openMySQL(ctx context.Context, u *url.URL, ttl time.Duration, opts []dlock.Option) (*Target, error) {
	cfg, mc, err := mysqlURL(u)
	if err != nil {
		return nil, err
	}
	t := &Target{Backend: "mysql-lease",
		Baseline: "one-statement upsert lease (INSERT ... ON DUPLICATE KEY UPDATE when expired, fence from a sequence) + token-checked DELETE"}
	if cfg.Mode == mysqllock.GetLock {
		t.Backend = "mysql-get_lock"
		t.Baseline = "GET_LOCK(name, 0) + RELEASE_LOCK(name) on a pinned pooled connection"
	}
	bc := baselineConfig(mc, u.Query().Has("interpolateParams"))
	if err := t.mysqlSides(ctx, cfg, dlockConfig(mc, u.Query()), bc, ttl, opts); err != nil {
		t.Close()
		return nil, err
	}
	return t, nil
}

// mysqlURL takes mysqllock's keys (mode, table) out of the URL and builds
// the go-sql-driver/mysql config of the rest, as dlock.Open does: TCP,
// the port 3306 by default, the other keys DSN parameters.
func mysqlURL(u *url.URL) (mysqllock.Config, *mysql.Config, error) {
	q := u.Query()
	cfg := mysqllock.Config{Mode: mysqllock.Mode(q.Get("mode")), Table: q.Get("table")}
	if cfg.Mode != "" && cfg.Mode != mysqllock.Lease && cfg.Mode != mysqllock.GetLock {
		return cfg, nil, fmt.Errorf("%w: mysql URL query mode=%q: want %s or %s", dlock.ErrInvalidArgument, cfg.Mode, mysqllock.Lease, mysqllock.GetLock)
	}
	q.Del("mode")
	q.Del("table")
	db := strings.TrimPrefix(u.Path, "/")
	if u.Host == "" || db == "" || strings.Contains(db, "/") {
		return cfg, nil, fmt.Errorf("%w: mysql URL: want mysql://user:password@host:port/database", dlock.ErrInvalidArgument)
	}
	port := u.Port()
	if port == "" {
		port = "3306"
	}
	mc, err := mysql.ParseDSN("tcp(" + net.JoinHostPort(u.Hostname(), port) + ")/" + url.PathEscape(db) + "?" + q.Encode())
	if err != nil {
		return cfg, nil, fmt.Errorf("%w: mysql URL: %s", dlock.ErrInvalidArgument, scrubURLErr(err, u))
	}
	if u.User != nil {
		mc.User = u.User.Username()
		mc.Passwd, _ = u.User.Password()
	}
	return cfg, mc, nil
}

// mysqlPool opens a pool of mc, MySQLIdleConns idle, whose round trips rt
// counts, and checks that it connects.
func (t *Target) mysqlPool(ctx context.Context, mc *mysql.Config, rt *Counter) (*sql.DB, error) {
	db, err := mysqlPool(mc, rt)
	if err != nil {
		return nil, fmt.Errorf("%w: mysql URL: %v", dlock.ErrInvalidArgument, err)
	}
	t.onClose(func() { _ = db.Close() })
	db.SetMaxIdleConns(MySQLIdleConns)
	if err := db.PingContext(ctx); err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	return db, nil
}

// mysqlSides sets up both sides, dlock's on mc and the baseline's on bc,
// each on a pool of its own.
func (t *Target) mysqlSides(ctx context.Context, cfg mysqllock.Config, mc, bc *mysql.Config, ttl time.Duration, opts []dlock.Option) error {
	drt, brt := &Counter{}, &Counter{}
	dp, err := t.mysqlPool(ctx, mc, drt)
	if err != nil {
		return err
	}
	t.NewLocker = func(o ...dlock.Option) (*dlock.Locker, error) { return cfg.Locker(dp, append(opts, o...)...) }
	if err := t.migratedDlockSide(ctx, drt); err != nil {
		return err
	}
	bp, err := t.mysqlPool(ctx, bc, brt)
	if err != nil {
		return err
	}
	if cfg.Mode == mysqllock.GetLock {
		g := mysqlGetLock{bp}
		waits := append([]Contender{{Name: "blocking GET_LOCK", Contend: g.contend}}, polls(shared(g.attempt))...)
		t.Base = Side{Cycle: cycleOf(g.attempt), Contenders: waits, RoundTrips: brt}
		return nil
	}
	ls, err := newMySQLLease(ctx, bp, ttl)
	if err != nil {
		return err
	}
	mk := tokenAttempts(ls)
	t.Base = Side{Cycle: cycleOf(mk), Contenders: append(polls(shared(mk)), backoffPoll(shared(mk))), RoundTrips: brt}
	return nil
}

// dlockConfig is mc as dlock.Open configures its own pool (mysqllock's
// url.go): parameters interpolated and several statements to a message,
// unless the URL sets them.
func dlockConfig(mc *mysql.Config, q url.Values) *mysql.Config {
	c := mc.Clone()
	if !q.Has("interpolateParams") {
		c.InterpolateParams = true
	}
	if !q.Has("multiStatements") {
		c.MultiStatements = true
	}
	return c
}

// baselineConfig is mc as a user counting round trips sets it: the client
// interpolates parameters (one message a statement, not a prepare, an
// execute and a close) unless the URL sets interpolateParams, and an
// UPDATE reports the rows it changed, not those it found (so that the
// upsert's result says whether it took the lock).
func baselineConfig(mc *mysql.Config, urlSetsInterpolate bool) *mysql.Config {
	c := mc.Clone()
	if !urlSetsInterpolate {
		c.InterpolateParams = true
	}
	c.ClientFoundRows = false
	return c
}
