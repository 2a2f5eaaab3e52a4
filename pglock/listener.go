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

	startMu sync.Mutex // serialises (re)connecting

	mu      sync.Mutex
	running bool
	closed  bool
	cancel  context.CancelFunc
	done    chan struct{} // closed when the loop has exited
	watches map[string]map[chan struct{}]struct{}
	evicts  map[chan driver.Eviction]struct{}
}

var errClosed = errors.New("pglock: driver closed")

func newListener(pool *pgxpool.Pool, releases, wake, evictions string) *listener {
	return &listener{
		pool: pool, releases: releases, wake: wake, evictions: evictions,
		watches: map[string]map[chan struct{}]struct{}{},
		evicts:  map[chan driver.Eviction]struct{}{},
	}
}

// Watch subscribes to notifications whose payload is key (a waiter's
// token). The LISTEN is active when it returns, so a notification after
// it is never missed.
func (l *listener) Watch(ctx context.Context, name string) (<-chan struct{}, func(), error) {
	if err := l.ensure(ctx); err != nil {
		return nil, nil, err
	}
	ch := make(chan struct{}, 1)
	l.mu.Lock()
	set := l.watches[name]
	if set == nil {
		set = map[chan struct{}]struct{}{}
		l.watches[name] = set
	}
	set[ch] = struct{}{}
	l.mu.Unlock()
	return ch, func() { l.unwatch(name, ch) }, nil
}

func (l *listener) unwatch(name string, ch chan struct{}) {
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

// dispatch wakes the waiters watching key (a token: one waiter). A
// payload may be a whole queue element, "TOKEN@CHANNEL" (see
// waiterElement), when a release of an earlier version read it.
func (l *listener) dispatch(key string) {
	key, _, _ = strings.Cut(key, "@")
	l.mu.Lock()
	defer l.mu.Unlock()
	for ch := range l.watches[key] {
		wake(ch)
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
			wake(ch)
		}
	}
}

func wake(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
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
