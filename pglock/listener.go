package pglock

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/dlockdev/dlock/driver"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// listener delivers notifications with LISTEN on ONE connection per
// driver, taken out of the pool (so the pool's hooks apply) and shared by
// every subscriber. In lease mode it listens on the driver's own wake
// channel, where a release names the token of the waiter it wakes (the
// head of the row's queue, queued by this driver), dispatched to that
// waiter, and on the table's release channel, where the releases of an
// earlier version wake the waiters that version queued; on the eviction
// channel, a force-release's payload is "FENCE NAME", handed to every
// eviction watcher. If the connection fails, every waiter is woken
// (to poll), every eviction watcher's channel is closed (its holders learn
// at their next refresh; the portable layer subscribes again when its
// watchdog next starts), and the next Watch opens a new connection.
type listener struct {
	pool      *pgxpool.Pool
	releases  string // "" in advisory mode, whose waiters wait in the server
	wake      string // the driver's own channel; "" in advisory mode
	evictions string
	onEvict   func(driver.Eviction) // called for an eviction handed to a watcher
	// onClock, when set, is told the database clock (µs) as the listening
	// connection opens, and the local time the reading was sent.
	onClock func(sent time.Time, us int64)

	startMu sync.Mutex // serialises (re)connecting

	mu      sync.Mutex
	running bool
	closed  bool
	cancel  context.CancelFunc
	done    chan struct{} // closed when the loop has exited
	watches map[string]map[chan string]struct{}
	evicts  map[chan driver.Eviction]struct{}
}

var errClosed = errors.New("pglock: driver closed")

func newListener(pool *pgxpool.Pool, releases, wake, evictions string) *listener {
	return &listener{
		pool: pool, releases: releases, wake: wake, evictions: evictions,
		watches: map[string]map[chan string]struct{}{},
		evicts:  map[chan driver.Eviction]struct{}{},
	}
}

// Watch subscribes to the notifications for key (a waiter's token): the
// payload, which starts with the token ("TOKEN" for a wake-up, "TOKEN p
// FENCE MICROS" for a hand-off), or "" when the listening connection
// failed. Only the latest is kept until read. The LISTEN is active when
// it returns, so a notification after it is never missed.
func (l *listener) Watch(ctx context.Context, name string) (<-chan string, func(), error) {
	if err := l.ensure(ctx); err != nil {
		return nil, nil, err
	}
	ch := make(chan string, 1)
	l.mu.Lock()
	set := l.watches[name]
	if set == nil {
		set = map[chan string]struct{}{}
		l.watches[name] = set
	}
	set[ch] = struct{}{}
	l.mu.Unlock()
	return ch, func() { l.unwatch(name, ch) }, nil
}

func (l *listener) unwatch(name string, ch chan string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.watches[name], ch)
	if len(l.watches[name]) == 0 {
		delete(l.watches, name)
	}
}

// ensure starts the listening connection unless it runs.
func (l *listener) ensure(ctx context.Context) error {
	l.startMu.Lock()
	defer l.startMu.Unlock()
	l.mu.Lock()
	running, closed := l.running, l.closed
	l.mu.Unlock()
	switch {
	case closed:
		return errClosed
	case running:
		return nil
	}
	conn, err := l.connect(ctx)
	if err != nil {
		return err
	}
	return l.start(conn)
}

func (l *listener) connect(ctx context.Context) (*pgx.Conn, error) {
	pc, err := l.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	conn := pc.Hijack()
	// Read before the LISTENs, whose statements stay the connection's
	// last in pg_stat_activity.
	if l.onClock != nil {
		var us int64
		sent := time.Now()
		if err := conn.QueryRow(ctx, "SELECT "+serverMicros).Scan(&us); err == nil {
			l.onClock(sent, us)
		}
	}
	for _, ch := range []string{l.releases, l.wake, l.evictions} {
		if ch == "" {
			continue
		}
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			closeConn(conn)
			return nil, err
		}
	}
	return conn, nil
}

func (l *listener) start(conn *pgx.Conn) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		closeConn(conn)
		return errClosed
	}
	ctx, cancel := context.WithCancel(context.Background())
	l.running, l.cancel, l.done = true, cancel, make(chan struct{})
	go l.loop(ctx, conn, l.done)
	return nil
}

func (l *listener) loop(ctx context.Context, conn *pgx.Conn, done chan struct{}) {
	defer close(done)
	defer closeConn(conn)
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			l.stopped()
			return
		}
		if n.Channel == l.evictions {
			if e, ok := driver.ParseEviction(n.Payload); ok {
				l.evicted(e)
			}
			continue
		}
		l.dispatch(n.Payload)
	}
}

// dispatch hands payload to the waiters watching its token (one
// waiter). The token ends at a space, or at "@" when a release of an
// earlier version sent a whole queue element (see wake.go).
func (l *listener) dispatch(payload string) {
	key, _, _ := strings.Cut(payload, " ")
	key, _, _ = strings.Cut(key, "@")
	l.mu.Lock()
	defer l.mu.Unlock()
	for ch := range l.watches[key] {
		wake(ch, payload)
	}
}

// stopped records the loss of the connection, wakes every waiter and
// closes every eviction watcher's channel.
func (l *listener) stopped() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.running = false
	for ch := range l.evicts {
		close(ch)
	}
	clear(l.evicts)
	for _, set := range l.watches {
		for ch := range set {
			wake(ch, "")
		}
	}
}

// wake puts msg in ch, replacing a message not yet read unless that one
// is a hand-off (the last message for its token, which a wake-up must not
// hide). Only dispatch and stopped send, under l.mu, so the second send
// cannot block.
func wake(ch chan string, msg string) {
	select {
	case old := <-ch:
		if isHandOff(old) {
			msg = old
		}
	default:
	}
	ch <- msg
}

// close ends the listening connection and waits for its goroutine.
func (l *listener) close() {
	l.startMu.Lock()
	defer l.startMu.Unlock()
	l.mu.Lock()
	l.closed = true
	cancel, done := l.cancel, l.done
	l.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

func closeConn(c *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = c.Close(ctx)
}
