package pglock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlockdev/dlock/internal/wireprobe"
	"github.com/jackc/pgx/v5/pgconn"
)

// answerWait is how long a new connection may stay silent before the
// dialer sends the address, over a second connection, a Redis PING:
// PostgreSQL answers a client's first message at once, while Redis (and
// an HTTP server) never answers it, waiting for a newline that never
// comes, which left Open waiting out its whole context. PostgreSQL closes
// a PING's connection without a word; any answer means another server.
// The checked connection itself is left alone: a slow PostgreSQL still
// answers it.
const answerWait = time.Second

// firstReplies are the first bytes PostgreSQL sends a client: S or N to
// an SSLRequest (G or N to a GSSENCRequest), R, E or v to a startup
// message, and a TLS record under sslnegotiation=direct.
const firstReplies = "SNGREv\x16"

// wrongServerError reports that the server at a URL's address did not
// answer as PostgreSQL.
type wrongServerError struct {
	addr   string
	answer string
}

func (e *wrongServerError) Error() string {
	return fmt.Sprintf("pglock: the server at %s did not answer as PostgreSQL (%s); check the URL's host and port", e.addr, e.answer)
}

// checkedDialer wraps a pool's dial function while Open checks the
// server: it notes a first reply no PostgreSQL sends, and a silence that
// a Redis PING explains. Once Open is done (settle) it dials plainly.
type checkedDialer struct {
	next    pgconn.DialFunc
	settled atomic.Bool

	mu    sync.Mutex
	wrong map[string]*wrongServerError // by address
	redis map[string]bool              // answered a PING: later dials fail at once
}

func newCheckedDialer(next pgconn.DialFunc) *checkedDialer {
	return &checkedDialer{next: next, wrong: map[string]*wrongServerError{}, redis: map[string]bool{}}
}

// settle stops the checks: the server answered as PostgreSQL.
func (d *checkedDialer) settle() { d.settled.Store(true) }

// explain returns the wrong-server error noted for any address, if any.
func (d *checkedDialer) explain() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, e := range d.wrong {
		return e
	}
	return nil
}

func (d *checkedDialer) note(addr string, e *wrongServerError, redis bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.wrong[addr] = e
	d.redis[addr] = d.redis[addr] || redis
}

func (d *checkedDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if d.settled.Load() {
		return d.next(ctx, network, addr)
	}
	d.mu.Lock()
	known, isRedis := d.wrong[addr], d.redis[addr]
	d.mu.Unlock()
	if isRedis {
		return nil, known
	}
	c, err := d.next(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	wc := &checkedConn{Conn: c, d: d, network: network, addr: addr, probed: make(chan struct{})}
	wc.timer = time.AfterFunc(answerWait, wc.probe)
	return wc, nil
}

// checkedConn is a connection whose first reply is checked.
type checkedConn struct {
	net.Conn
	d             *checkedDialer
	network, addr string
	timer         *time.Timer
	probed        chan struct{} // closed when a started probe has ended

	mu       sync.Mutex
	answered bool // the first bytes came
	closed   bool
	probing  bool
	wrong    *wrongServerError // the probe found Redis
}

func (c *checkedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.firstReply(p[:n])
	}
	c.mu.Lock()
	wrong := c.wrong
	c.mu.Unlock()
	if err != nil && wrong != nil {
		return n, wrong
	}
	return n, err
}

// firstReply checks the first bytes the server sent.
func (c *checkedConn) firstReply(b []byte) {
	c.mu.Lock()
	first := !c.answered
	c.answered = true
	c.mu.Unlock()
	if !first {
		return
	}
	c.timer.Stop()
	if !strings.ContainsRune(firstReplies, rune(b[0])) {
		c.d.note(c.addr, &wrongServerError{c.addr, fmt.Sprintf("it sent an unexpected reply: %q", b[:min(len(b), 16)])}, false)
	}
}

// probe runs when the server stayed silent for answerWait: when the
// address answers a Redis PING, the connection is closed with that
// finding (Redis, or what it sent), and later dials to it fail at once.
func (c *checkedConn) probe() {
	c.mu.Lock()
	if c.answered || c.closed {
		c.mu.Unlock()
		return
	}
	c.probing = true
	c.mu.Unlock()
	defer close(c.probed)
	reply := wireprobe.Ping(c.network, c.addr)
	if reply == nil {
		return
	}
	e := &wrongServerError{c.addr, "it answered like Redis: is this a redis:// address?"}
	if !wireprobe.IsRedis(reply) {
		e.answer = fmt.Sprintf("it answered a Redis PING, which PostgreSQL does not: %q", reply[:min(len(reply), 16)])
	}
	c.mu.Lock()
	c.wrong = e
	c.mu.Unlock()
	c.d.note(c.addr, e, true)
	_ = c.Conn.Close()
}

func (c *checkedConn) Close() error {
	c.mu.Lock()
	c.closed = true
	probing := c.probing
	c.mu.Unlock()
	c.timer.Stop()
	if probing {
		<-c.probed
	}
	return c.Conn.Close()
}

// connectFailure rewrites a failed connection's error for the user: what
// the server said, without the attempts before it (with sslmode=prefer,
// pgx tries TLS first and reports "server refused TLS connection" ahead
// of the cause), or that the address is not a PostgreSQL server's. The
// result still unwraps to err.
func connectFailure(err error, d *checkedDialer) error {
	if wrong := d.explain(); wrong != nil {
		return &rewordedError{msg: wrong.Error(), err: errors.Join(wrong, err)}
	}
	var ce *pgconn.ConnectError
	var pe *pgconn.PgError
	if !errors.As(err, &ce) || !errors.As(ce, &pe) {
		return err
	}
	msg := fmt.Sprintf("failed to connect to `user=%s database=%s` at %s: %s (SQLSTATE %s)",
		ce.Config.User, ce.Config.Database, serverAddr(ce.Config), pe.Message, pe.Code)
	if pe.Code == codeNoDatabase {
		msg += "; create it (createdb), or name an existing database in the URL's path"
	}
	return &rewordedError{msg: msg, err: err}
}

// serverAddr is the address a config names first.
func serverAddr(c *pgconn.Config) string {
	return net.JoinHostPort(c.Host, fmt.Sprint(c.Port))
}

// rewordedError is err with a clearer message.
type rewordedError struct {
	msg string
	err error
}

func (e *rewordedError) Error() string { return e.msg }
func (e *rewordedError) Unwrap() error { return e.err }
