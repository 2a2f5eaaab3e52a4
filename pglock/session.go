package pglock

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/dlockdev/dlock/driver"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// session is one held advisory lock: the pinned connection whose backend
// holds the key.
type session struct {
	mu    sync.Mutex // one statement at a time on conn
	conn  *pgxpool.Conn
	key   int64
	name  string
	fence uint64
	pid   uint32 // the backend that took the lock
	ended bool
}

// ErrTransactionPooling reports a proxy that hands one client connection's
// statements to different server backends (PgBouncer with
// pool_mode=transaction or statement). Session advisory locks cannot work
// through it: the lock stays on a backend that then serves other clients.
var ErrTransactionPooling = errors.New("pglock: the server backend changed between statements on one connection " +
	"(a transaction-pooling proxy such as PgBouncer pool_mode=transaction?); advisory mode needs a direct or session-pooled connection")

// healthy checks that the pinned backend is the one that took the lock and
// still holds it.
func (s *session) healthy(ctx context.Context, check string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return errors.New("session already ended")
	}
	var (
		pid  uint32
		held bool
	)
	hi, lo := keyHalves(s.key)
	if err := s.conn.QueryRow(ctx, check, hi, lo).Scan(&pid, &held); err != nil {
		return fmt.Errorf("pinned session: %w", err)
	}
	switch {
	case pid != s.pid:
		return ErrTransactionPooling
	case !held:
		return errors.New("pinned session no longer holds the advisory lock")
	}
	return nil
}

// keyHalves splits a key as pg_locks shows it: classid the high 32 bits,
// objid the low 32 bits, both unsigned.
func keyHalves(key int64) (hi, lo int64) {
	u := uint64(key)
	return int64(u >> 32), int64(u & 0xffffffff)
}

// unlock releases the key and hands the connection back to the pool; on
// any failure the connection is closed, which ends the session and its
// locks.
func (s *session) unlock(ctx context.Context, release, channel string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return errors.New("session already ended")
	}
	s.ended = true
	var ok bool
	if err := s.conn.QueryRow(ctx, release, s.key, channel, s.name).Scan(&ok); err != nil {
		ended := isConnErr(s.conn, err)
		destroy(s.conn)
		if ended {
			// The session, and with it the lock, ended before the unlock.
			return fmt.Errorf("%w: %w", driver.ErrSessionEnded, err)
		}
		return err
	}
	if !ok {
		destroy(s.conn)
		return fmt.Errorf("%w: the pinned session no longer held the advisory lock", driver.ErrExpired)
	}
	s.conn.Release()
	return nil
}

// isConnErr reports whether err ended conn's session (server-side
// termination, broken connection), as opposed to e.g. a canceled context
// on a live session.
func isConnErr(conn *pgxpool.Conn, err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Severity == "FATAL" || pgErr.Code == "57P01"
	}
	return conn.Conn().IsClosed() && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// end closes the pinned connection, ending the session and its lock.
func (s *session) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ended {
		s.ended = true
		destroy(s.conn)
	}
}

// checkPinnable detects a proxy in front of the server. The backend pid
// the statement reported differs from the one the connection announced at
// start-up only when something in between speaks for the server; then a
// second statement shows whether the backend changes under us (transaction
// pooling) or stays (session pooling, which is fine). A transaction pooler
// that happens to reuse the same backend twice goes unnoticed here; the
// health check at each refresh compares the pid again.
func checkPinnable(ctx context.Context, conn *pgxpool.Conn, pid uint32) error {
	if pid == conn.Conn().PgConn().PID() {
		return nil
	}
	var again uint32
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&again); err != nil {
		return err
	}
	if again != pid {
		return ErrTransactionPooling
	}
	return nil
}
