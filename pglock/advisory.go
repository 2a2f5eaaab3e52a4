package pglock

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/dlockdev/dlock/driver"
	"github.com/jackc/pgx/v5/pgxpool"
)

// advisory is the advisory-mode driver: a held lock is a session advisory
// lock on a connection pinned from the pool for the life of the lease.
type advisory struct {
	base
	acquire, check, release string

	mu       sync.Mutex
	sessions map[string]*session // by token
}

func newAdvisory(b base) *advisory {
	return &advisory{
		base: b, acquire: b.sql(advisoryAcquire), check: b.sql(advisoryCheck),
		release: b.sql(advisoryRelease), sessions: map[string]*session{},
	}
}

// Capabilities: the lease ends with the session, the TTL only paces the
// health checks.
func (d *advisory) Capabilities() driver.Capabilities {
	return driver.Capabilities{SessionBound: true}
}

// TryAcquire takes a pool connection and makes one attempt on it; the
// connection stays pinned to the lease when the lock is taken and goes
// back to the pool otherwise. Any error closes it: a session whose state
// is unknown may hold the lock, and closing it is what frees it.
func (d *advisory) TryAcquire(ctx context.Context, req driver.Request) (driver.Grant, error) {
	if s := d.session(req.Token); s != nil {
		return driver.Grant{Acquired: true, Fence: s.fence}, nil
	}
	conn, err := d.pool.Acquire(ctx)
	if err != nil {
		return driver.Grant{}, err
	}
	s := &session{conn: conn, key: Key(req.Name), name: req.Name}
	g, err := d.attempt(ctx, s, req)
	switch {
	case err != nil:
		destroy(conn)
	case !g.Acquired:
		conn.Release()
	default:
		d.pin(req.Token, s)
	}
	return g, err
}

// attempt runs the acquire statement on s's connection and, when the lock
// was taken, checks that the connection can be pinned.
func (d *advisory) attempt(ctx context.Context, s *session, req driver.Request) (driver.Grant, error) {
	var (
		ok    bool
		fence int64
		owner string
	)
	err := s.conn.QueryRow(ctx, d.acquire, s.key, req.Name, req.Owner).Scan(&ok, &fence, &owner, &s.pid)
	if err != nil {
		return driver.Grant{}, err
	}
	if !ok {
		return driver.Grant{Holder: driver.Holder{Name: req.Name, Owner: owner, Fence: uint64(fence), TTL: -1}}, nil
	}
	if err := checkPinnable(ctx, s.conn, s.pid); err != nil {
		return driver.Grant{}, err
	}
	s.fence = uint64(fence)
	return driver.Grant{Acquired: true, Fence: s.fence}, nil
}

func (d *advisory) session(token string) *session {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.sessions[token]
}

func (d *advisory) pin(token string, s *session) {
	d.mu.Lock()
	d.sessions[token] = s
	d.mu.Unlock()
}

func (d *advisory) unpin(token string) *session {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.sessions[token]
	delete(d.sessions, token)
	return s
}

// Refresh checks the pinned session's health: same backend, still holding
// the key. Any failure ends the session (closing the connection frees the
// lock on the server) and reports the lease gone.
func (d *advisory) Refresh(ctx context.Context, name, token string, _ time.Duration) error {
	s := d.session(token)
	if s == nil {
		return driver.ErrExpired
	}
	if err := s.healthy(ctx, d.check); err != nil {
		if s := d.unpin(token); s != nil {
			s.end()
		}
		return fmt.Errorf("%w: %w", driver.ErrSessionEnded, err)
	}
	return nil
}

// Release unlocks the key, notifies waiters, and returns the connection to
// the pool; on any failure the connection is closed instead.
func (d *advisory) Release(ctx context.Context, name, token string) error {
	s := d.unpin(token)
	if s == nil {
		return driver.ErrExpired
	}
	return s.unlock(ctx, d.release, d.channel)
}

// Close ends every session still pinned (their locks go with them), stops
// the listener, and closes the pool if it was opened from a URL.
func (d *advisory) Close() error {
	d.mu.Lock()
	ss := d.sessions
	d.sessions = map[string]*session{}
	d.mu.Unlock()
	for _, s := range ss {
		s.end()
	}
	return d.close()
}

// Migrate creates the fence table if it does not exist.
func (d *advisory) Migrate(ctx context.Context) error { return d.migrate(ctx, fenceDDL) }

func destroy(conn *pgxpool.Conn) {
	closeConn(conn.Hijack())
}
