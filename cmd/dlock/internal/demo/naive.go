package demo

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

// naiveStore is the naive lock, on the demo's backend: SET key value
// [NX] [EX ttl] and a plain DEL. No token check, and no expiry unless asked.
// It exists only to SHOW the bugs; never lock like this.
type naiveStore interface {
	// SetNX sets key to value if it is absent (or expired); ttl 0 means
	// no expiry at all.
	SetNX(ctx context.Context, key, value string, ttl time.Duration) (bool, error)
	// Del deletes key whoever set it.
	Del(ctx context.Context, key string) error
	// Get returns key's value, if set and not expired.
	Get(ctx context.Context, key string) (string, bool, error)
	Close() error
	// What describes the store in the timeline.
	What() string
}

// openNaive opens the naive store on the backend named by rawURL; dir holds
// the SQLite file for file:// URLs.
func openNaive(ctx context.Context, rawURL, dir string) (naiveStore, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, errors.New("demo: malformed URL")
	}
	q := u.Query()
	for _, k := range []string{"ttl", "wait", "owner", "mode", "prefix", "dial_timeout", "session_timeout"} {
		q.Del(k)
	}
	u.RawQuery = q.Encode()
	switch u.Scheme {
	case "file":
		return openNaiveSQLite(filepath.Join(dir, "naive.db"))
	case "redis", "rediss":
		return openNaiveRedis(ctx, u.String())
	case "postgres", "postgresql":
		return openNaivePostgres(ctx, u.String())
	case "etcd":
		return openNaiveEtcd(u)
	case "zk":
		return openNaiveZK(u)
	}
	return nil, fmt.Errorf("demo: this scenario's naive lock is implemented for file://, redis://, postgres://, etcd:// and zk:// URLs, not %s://", u.Scheme)
}

// naiveSQLite is a plain row per key in a SQLite file.
type naiveSQLite struct{ db *sql.DB }

func openNaiveSQLite(path string) (naiveStore, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
	if err != nil {
		return nil, err
	}
	_, err = db.Exec(`CREATE TABLE IF NOT EXISTS naive_lock (key TEXT PRIMARY KEY, value TEXT, expires_ms INTEGER)`)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("demo: naive lock table: %w", err)
	}
	return &naiveSQLite{db}, nil
}

func (s *naiveSQLite) What() string { return "a plain SQLite row" }
func (s *naiveSQLite) Close() error { return s.db.Close() }

func (s *naiveSQLite) SetNX(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	var exp any
	if ttl > 0 {
		exp = time.Now().Add(ttl).UnixMilli()
	}
	res, err := s.db.ExecContext(ctx, `INSERT INTO naive_lock (key, value, expires_ms) VALUES (?1, ?2, ?3)
		ON CONFLICT (key) DO UPDATE SET value = ?2, expires_ms = ?3
		WHERE naive_lock.expires_ms IS NOT NULL AND naive_lock.expires_ms <= ?4`, key, value, exp, nowMs())
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

func (s *naiveSQLite) Del(ctx context.Context, key string) error {
	_, err := s.db.ExecContext(ctx, `DELETE FROM naive_lock WHERE key = ?`, key)
	return err
}

func (s *naiveSQLite) Get(ctx context.Context, key string) (string, bool, error) {
	var v string
	err := s.db.QueryRowContext(ctx, `SELECT value FROM naive_lock WHERE key = ?1
		AND (expires_ms IS NULL OR expires_ms > ?2)`, key, nowMs()).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	return v, err == nil, err
}

// naiveRedis is SET NX [EX] / DEL / GET.
type naiveRedis struct{ c *redis.Client }

func openNaiveRedis(ctx context.Context, rawURL string) (naiveStore, error) {
	opt, err := redis.ParseURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("demo: redis URL: %w", err)
	}
	c := redis.NewClient(opt)
	if err := c.Ping(ctx).Err(); err != nil {
		c.Close()
		return nil, fmt.Errorf("demo: redis: %w", err)
	}
	return &naiveRedis{c}, nil
}

func (s *naiveRedis) What() string { return "Redis SET/DEL" }
func (s *naiveRedis) Close() error { return s.c.Close() }

func (s *naiveRedis) SetNX(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	return s.c.SetNX(ctx, key, value, ttl).Result()
}

func (s *naiveRedis) Del(ctx context.Context, key string) error { return s.c.Del(ctx, key).Err() }

func (s *naiveRedis) Get(ctx context.Context, key string) (string, bool, error) {
	v, err := s.c.Get(ctx, key).Result()
	if errors.Is(err, redis.Nil) {
		return "", false, nil
	}
	return v, err == nil, err
}

// naivePostgres is a plain row per key in a Postgres table.
type naivePostgres struct{ c *pgx.Conn }

func openNaivePostgres(ctx context.Context, rawURL string) (naiveStore, error) {
	c, err := pgx.Connect(ctx, rawURL)
	if err != nil {
		return nil, fmt.Errorf("demo: postgres: %w", err)
	}
	_, err = c.Exec(ctx, `CREATE TABLE IF NOT EXISTS dlock_demo_naive_lock (key text PRIMARY KEY, value text, expires_at timestamptz)`)
	if err != nil {
		c.Close(ctx)
		return nil, fmt.Errorf("demo: naive lock table: %w", err)
	}
	return &naivePostgres{c}, nil
}

func (s *naivePostgres) What() string { return "a plain Postgres row" }
func (s *naivePostgres) Close() error { return s.c.Close(context.Background()) }

func (s *naivePostgres) SetNX(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	var exp any
	if ttl > 0 {
		exp = time.Now().Add(ttl)
	}
	tag, err := s.c.Exec(ctx, `INSERT INTO dlock_demo_naive_lock (key, value, expires_at) VALUES ($1, $2, $3)
		ON CONFLICT (key) DO UPDATE SET value = $2, expires_at = $3
		WHERE dlock_demo_naive_lock.expires_at IS NOT NULL AND dlock_demo_naive_lock.expires_at <= now()`, key, value, exp)
	return tag.RowsAffected() == 1, err
}

func (s *naivePostgres) Del(ctx context.Context, key string) error {
	_, err := s.c.Exec(ctx, `DELETE FROM dlock_demo_naive_lock WHERE key = $1`, key)
	return err
}

func (s *naivePostgres) Get(ctx context.Context, key string) (string, bool, error) {
	var v string
	err := s.c.QueryRow(ctx, `SELECT value FROM dlock_demo_naive_lock WHERE key = $1
		AND (expires_at IS NULL OR expires_at > now())`, key).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, nil
	}
	return v, err == nil, err
}
