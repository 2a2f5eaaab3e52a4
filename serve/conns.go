package serve

import (
	"net"
	"net/http"
	"sync"
)

// Listener wraps ln, the listener an http.Server serves this Server on,
// so that each client address holds at most Config.MaxConnsPerClient
// connections at once: one past that is closed as soon as it is
// accepted, before it costs a goroutine or a read. Connections from
// Config.TrustedProxies are not counted here (one proxy carries many
// clients); the requests they carry are counted per forwarded client
// address instead, at the same bound. Wrap the plain TCP listener, under
// any TLS.
func (s *Server) Listener(ln net.Listener) net.Listener {
	return &capListener{Listener: ln, s: s, counts: newCounter(s.cfg.MaxConnsPerClient)}
}

type capListener struct {
	net.Listener
	s      *Server
	counts *counter
}

// Accept returns the next connection within its address's bound.
func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		a, ok := parseAddr(c.RemoteAddr().String())
		if !ok || l.s.trusted(a) {
			return c, nil
		}
		key := addrKey(a)
		if l.counts.take(key) {
			return &countedConn{Conn: c, done: sync.OnceFunc(func() { l.counts.give(key) })}, nil
		}
		_ = c.Close()
	}
}

// countedConn gives its place back when closed.
type countedConn struct {
	net.Conn
	done func()
}

func (c *countedConn) Close() error {
	c.done()
	return c.Conn.Close()
}

// counter counts what each key holds, up to max.
type counter struct {
	limit int
	mu    sync.Mutex
	n     map[string]int
}

func newCounter(limit int) *counter { return &counter{limit: limit, n: map[string]int{}} }

// take counts one more for key; false means key is at its bound.
func (c *counter) take(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[key] >= c.limit {
		return false
	}
	c.n[key]++
	return true
}

func (c *counter) give(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[key]--; c.n[key] <= 0 {
		delete(c.n, key)
	}
}

// proxied counts a request from a trusted proxy against its forwarded
// client's bound; ok false means it answered 429. A request from any
// other peer is counted by Listener, as its connection.
func (s *Server) proxied(w http.ResponseWriter, r *http.Request) (done func(), ok bool) {
	peer, parsed := parseAddr(r.RemoteAddr)
	if !parsed || !s.trusted(peer) {
		return func() {}, true
	}
	key := s.clientAddr(r)
	if !s.inFlight.take(key) {
		refuse(w)
		w.Header().Set("Retry-After", "1")
		writeProblem(w, http.StatusTooManyRequests, "rate-limited", "Too many requests in flight",
			"this client address has too many requests in flight (Config.MaxConnsPerClient)")
		return nil, false
	}
	return func() { s.inFlight.give(key) }, true
}
