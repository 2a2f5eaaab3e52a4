package pglock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dlockdev/dlock/driver"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// watchDelay is how long a lease is held before its session's watcher
// starts reading the pinned connection. A lease released sooner never
// pays for a watcher (a goroutine, and a stop before the unlock); one held
// longer learns of its connection's loss within watchDelay of the grant,
// and at once afterwards.
const watchDelay = 50 * time.Millisecond

// session is one held advisory lock: the pinned connection whose backend
// holds the key.
type session struct {
	mu    sync.Mutex // one statement at a time on conn
	conn  *pgxpool.Conn
	key   int64
	name  string
	owner string
	fence uint64
	pid   uint32 // the backend that took the lock
	ended bool

	publish   string // the statement recording the grant in the holders table
	published bool

	// The watcher: while the session is idle, a goroutine waits on the
	// connection (WaitForNotification, which returns on any read error),
	// so that a closed socket is seen when it closes. It is armed with a
	// timer alone: its context is made when it starts, so that a lease
	// released before then costs no more than the timer.
	timer   *time.Timer
	watchMu sync.Mutex
	stopped bool               // disarmed: a watcher yet to start does not
	stopW   context.CancelFunc // stops the watcher once it has started
	watcher sync.WaitGroup     // the armed watcher, until it has returned
	lostMu  sync.Mutex
	lost    error  // why the connection closed, once it has
	lostFn  func() // called (once, on its own goroutine) with lost, unless evicted
	// dropFn ends the session once it is lost, closing its connection
	// (which gives its place in the pool back): a lease whose session
	// ended is never released, and its connection would otherwise stay
	// taken from the pool for as long as the driver lives. The session
	// stays pinned, ended, so that its token's Refresh or Release still
	// says driver.ErrSessionEnded (and forgets it).
	dropFn  func()
	evicted bool
	evictCh chan struct{} // closed with evicted; made when first waited on

	// evictions is the driver listener's watchingEvictions: a channel
	// closed when the listening connection ends, nil when no eviction
	// watcher is subscribed.
	evictions func() <-chan struct{}
}

// ErrTransactionPooling reports a proxy that hands one client connection's
// statements to different server backends (PgBouncer with
// pool_mode=transaction or statement). Session advisory locks cannot work
// through it: the lock stays on a backend that then serves other clients.
var ErrTransactionPooling = errors.New("pglock: the server backend changed between statements on one connection " +
	"(a transaction-pooling proxy such as PgBouncer pool_mode=transaction?); advisory mode needs a direct or session-pooled connection")

// start arms the watcher, watchDelay from now.
func (s *session) start() { s.arm(watchDelay) }

// arm starts the watcher after delay. Called with the connection idle
// and no watcher armed.
func (s *session) arm(delay time.Duration) {
	s.watchMu.Lock()
	s.stopped, s.stopW = false, nil
	s.watchMu.Unlock()
	s.watcher.Add(1)
	s.timer = time.AfterFunc(delay, s.startWatch)
}

// startWatch runs the watcher, unless disarm came first.
func (s *session) startWatch() {
	defer s.watcher.Done()
	s.watchMu.Lock()
	if s.stopped {
		s.watchMu.Unlock()
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s.stopW = cancel
	s.watchMu.Unlock()
	s.watch(ctx)
}

// publishTimeout bounds the watcher's publication of a grant.
const publishTimeout = 5 * time.Second

// watch first publishes the grant in the holders table (once), then reads
// the idle connection until stopped or until it fails. The server sends
// nothing to an idle session that LISTENs to nothing, except when it ends
// it (a FATAL error, a closed socket). The publication is not canceled by
// a stop (that would close the connection, and with it the lock): a stop
// waits for it, one round trip at most.
func (s *session) watch(ctx context.Context) {
	if !s.published && ctx.Err() == nil {
		pctx, cancel := context.WithTimeout(context.Background(), publishTimeout)
		_, err := s.conn.Exec(pctx, s.publish, s.key, s.name, s.owner, int64(s.fence))
		cancel()
		if err != nil {
			if s.conn.Conn().IsClosed() {
				s.lose(ctx, err)
			}
			return // the next Refresh tells
		}
		s.published = true
	}
	pc := s.conn.Conn().PgConn()
	for ctx.Err() == nil {
		err := pc.WaitForNotification(ctx)
		switch {
		case err == nil || ctx.Err() != nil:
		case pc.IsClosed():
			s.lose(ctx, err)
			return
		default: // not a loss; the next statement will tell
			return
		}
	}
}

// lose records the loss of the connection. A session evicted by
// ForceRelease leaves the end of its lease to the eviction watcher:
// the lease is not ended as lost, so that it ends as force-released. As
// the eviction notice arrives just after the connection closes (see
// evictionGrace), a backend terminated by an administrator waits for it
// while evictions are watched.
func (s *session) lose(ctx context.Context, err error) {
	var down <-chan struct{}
	if adminTerminated(err) && s.evictions != nil {
		down = s.evictions()
	}
	if down != nil {
		t := time.NewTimer(evictionGrace)
		defer t.Stop()
		select {
		case <-s.evictedCh():
		case <-down:
		case <-t.C:
		case <-ctx.Done():
		}
	}
	s.setLost(err)
}

func (s *session) setLost(err error) {
	s.lostMu.Lock()
	defer s.lostMu.Unlock()
	if s.lost == nil {
		s.lost = fmt.Errorf("%w: %w", errSessionLost, err)
		if !s.evicted && s.lostFn != nil {
			go s.lostFn()
		}
		if s.dropFn != nil {
			// Not here: ending the session waits for the watcher that
			// is calling this.
			go s.dropFn()
		}
	}
}

// onLost registers fn to be called when the session is lost (at once if
// it already is), unless it was evicted: the eviction watcher ends that
// lease, as force-released. fn runs on a goroutine of its own, as it may
// release the lease, which waits for the watcher that detected the loss.
func (s *session) onLost(fn func()) {
	s.lostMu.Lock()
	defer s.lostMu.Unlock()
	s.lostFn = fn
	if s.lost != nil && !s.evicted {
		go fn()
	}
}

// markEvicted records that ForceRelease evicted this session's grant and
// that an eviction watcher was told.
func (s *session) markEvicted() {
	s.lostMu.Lock()
	defer s.lostMu.Unlock()
	if !s.evicted && s.lost == nil {
		s.evicted = true
		if s.evictCh != nil {
			close(s.evictCh)
		}
	}
}

// evictedCh returns a channel closed once the session is marked evicted
// (already closed if it is).
func (s *session) evictedCh() <-chan struct{} {
	s.lostMu.Lock()
	defer s.lostMu.Unlock()
	if s.evictCh == nil {
		s.evictCh = make(chan struct{})
		if s.evicted {
			close(s.evictCh)
		}
	}
	return s.evictCh
}

// adminTerminated reports whether err is the server ending the session
// "due to administrator command": pg_terminate_backend, or a shutdown.
func adminTerminated(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == codeAdminShutdown
}

func (s *session) lostErr() error {
	s.lostMu.Lock()
	defer s.lostMu.Unlock()
	return s.lost
}

// disarm stops the watcher and waits until it no longer reads the
// connection. It returns the connection's loss, if the watcher saw one.
func (s *session) disarm() error {
	if s.timer == nil {
		return s.lostErr()
	}
	if s.timer.Stop() {
		s.watcher.Done() // never started
	} else {
		s.watchMu.Lock()
		s.stopped = true
		if s.stopW != nil {
			s.stopW()
		}
		s.watchMu.Unlock()
		s.watcher.Wait()
	}
	s.timer = nil
	return s.lostErr()
}

// healthy checks that the pinned connection is open, its backend is the
// one that took the lock, and it still holds the key. A connection the
// watcher saw close fails at once, without a round trip.
func (s *session) healthy(ctx context.Context, check string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return s.endedErr()
	}
	if err := s.disarm(); err != nil {
		return err
	}
	defer s.arm(0)
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

// endedErr says why an ended session is of no more use: the loss of its
// connection, when that is what ended it.
func (s *session) endedErr() error {
	if err := s.lostErr(); err != nil {
		return err
	}
	return errors.New("session already ended")
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
func (s *session) unlock(ctx context.Context, release string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return fmt.Errorf("%w: %w", driver.ErrSessionEnded, s.endedErr())
	}
	s.ended = true
	if err := s.disarm(); err != nil {
		destroy(s.conn)
		return fmt.Errorf("%w: %w", driver.ErrSessionEnded, err)
	}
	var ok bool
	if err := s.conn.QueryRow(ctx, release, s.key).Scan(&ok); err != nil {
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
		return pgErr.Severity == "FATAL" || pgErr.Code == codeAdminShutdown
	}
	return conn.Conn().IsClosed() && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// end closes the pinned connection, ending the session and its lock.
func (s *session) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ended {
		s.ended = true
		_ = s.disarm()
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
