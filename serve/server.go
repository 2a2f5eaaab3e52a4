// Package serve is dlock's HTTP service: fenced leases over HTTP/JSON for
// programs in any language, a Server-Sent Events stream that pushes the
// loss of a lease the moment the server learns it, list, inspect and
// force-release, elections and semaphores, the dashboard's data, and the
// OpenAPI document. `dlock serve` runs it; docs/serve.md is its manual.
//
// The server holds each lease on the client's behalf with the library
// (watchdog, fence, loss detection), and keeps it only while its client
// shows it is alive: an open events stream, or a renew at least once per
// TTL. A client that vanishes loses its lease within its TTL. A lease
// belongs to the client that took it (its token or its certificate):
// any other is answered as if its lease_id were unknown.
package serve

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/dlockdev/dlock"
)

// Defaults of Config.
const (
	// DefaultMaxBodyBytes bounds a request body.
	DefaultMaxBodyBytes = 64 << 10
	// DefaultRatePerSecond and DefaultBurst bound each client's requests.
	DefaultRatePerSecond = 100
	DefaultBurst         = 200
	// DefaultBodyReadTimeout bounds the time to read a request body.
	DefaultBodyReadTimeout = 10 * time.Second
	// DefaultMaxConnsPerClient bounds one client address's connections.
	DefaultMaxConnsPerClient = 128
)

// Config configures a Server.
type Config struct {
	// Locker is the backend the server hands out leases from (required).
	// The server adds its Hooks to it.
	Locker *dlock.Locker
	// Tokens are the client bearer tokens; AdminTokens may also
	// force-release, and are valid as client tokens too. Each token is
	// a client of its own: a lease belongs to the token that took it
	// (another gets 404 for its lease_id), and logs name a token by its
	// position ("client token 2", "admin token 1"), never by its text.
	Tokens      []string
	AdminTokens []string
	// ClientCerts says that the listener requires and verifies TLS
	// client certificates (mTLS: tls.RequireAndVerifyClientCert); New
	// then needs no token. A verified certificate authenticates a client
	// whether or not this is set; a request without one is refused.
	// Certificates with the same subject are one client.
	ClientCerts bool
	// InsecureNoAuth serves clients without authentication. The CLI
	// allows it only on a loopback listener. Every client is then one:
	// any of them may renew, follow or release any lease.
	InsecureNoAuth bool
	// LoopbackOnly says that the server listens on loopback addresses
	// only: a request whose Host is not a loopback name (localhost,
	// *.localhost) or address is refused (421), so that a web page whose
	// own name was made to resolve to 127.0.0.1 (DNS rebinding) cannot
	// reach the server as if it were its own origin.
	LoopbackOnly bool
	// MaxBodyBytes bounds a request body (default DefaultMaxBodyBytes).
	MaxBodyBytes int64
	// BodyReadTimeout bounds the time to read a request body, from the end
	// of its headers (default DefaultBodyReadTimeout); a body not read by
	// then is answered 408 and its connection closed. It bounds reading
	// only: a response (an events stream) may last as long as it needs.
	BodyReadTimeout time.Duration
	// MaxConnsPerClient bounds the connections one client address holds
	// at once, through Listener, and behind a trusted proxy the requests
	// it has in flight (default DefaultMaxConnsPerClient).
	MaxConnsPerClient int
	// RatePerSecond and Burst bound each client's (token's, or remote
	// address's) requests (defaults DefaultRatePerSecond, DefaultBurst).
	RatePerSecond float64
	Burst         int
	// TrustedProxies are the addresses of the proxies (load balancers) in
	// front of the server. A request from one of them is the client's
	// that X-Forwarded-For names: the last address there that is not a
	// trusted proxy. From any other address, X-Forwarded-For is ignored.
	// The client address keys the limits on failed authentication,
	// connections and requests in flight.
	TrustedProxies []netip.Prefix
	// Metrics, when set, is served at /metrics (client auth applies).
	Metrics http.Handler
	// Dashboard, when set, is served at / and /static/ (package
	// serve/dashboard).
	Dashboard http.Handler
	// MaxDashboardStreams bounds the dashboard streams one client (a
	// token, a certificate, or an address without authentication) has
	// open at once (default DefaultMaxDashboardStreams); past it, 429.
	MaxDashboardStreams int
	// LeaseKeys, when set, make the server one of several replicas on one
	// backend: any of them serves any lease (renew, events, release),
	// adopting it from the backend (Locker.Resume), and a replica that
	// stops or dies costs no lease whose client turns to another within
	// the lease's TTL. Every replica needs the same keys, each at least
	// 32 bytes of secret random text (e.g. openssl rand -hex 32); the first
	// seals new lease ids and every one opens them, so that a key can be
	// rotated (seal.go). New refuses a backend that cannot adopt a lease
	// (ZooKeeper, Postgres advisory mode), saying why. Without keys the
	// server is the only one: a lease lives as long as its process, which
	// releases every lease when it stops.
	LeaseKeys [][]byte
	// Logger receives one line per failed request and per lease the
	// server gives up; nil discards. Tokens never reach it.
	Logger *slog.Logger
}

// Server is the HTTP API. It is an http.Handler; Close releases every
// lease it holds and ends its streams.
type Server struct {
	cfg    Config
	l      *dlock.Locker
	log    *slog.Logger
	mux    *http.ServeMux
	routes []string // "METHOD /pattern", for the OpenAPI check

	leases     *leaseTable
	seal       *sealer
	replicated bool // Config.LeaseKeys: one of several replicas (adopt.go)
	board      *board
	shared     shared   // the dashboard's snapshot
	viewers    *counter // dashboard streams per client

	limMu     sync.Mutex
	limiters  map[string]*rate.Limiter
	authFails *failLimiter
	inFlight  *counter // requests in flight per client behind a trusted proxy

	sessions *sessionStore // dashboard sign-ins, by cookie
	signIns  *signInStore  // one-time sign-in links not yet used

	unhook  func() // takes the board's hooks off the Locker
	stop    chan struct{}
	closing sync.Once
	bg      sync.WaitGroup
}

// New checks cfg and builds the Server.
func New(cfg Config) (*Server, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	cfg.defaults()
	seal, err := newSealer(cfg.LeaseKeys)
	if err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, l: cfg.Locker, log: log, mux: http.NewServeMux(),
		limiters: map[string]*rate.Limiter{}, authFails: newFailLimiter(), inFlight: newCounter(cfg.MaxConnsPerClient), viewers: newCounter(cfg.MaxDashboardStreams), sessions: newSessionStore(), signIns: newSignInStore(), stop: make(chan struct{})}
	s.leases, s.seal, s.replicated = newLeaseTable(), seal, len(cfg.LeaseKeys) > 0
	s.board = newBoard(cfg.Locker.Backend())
	s.unhook = cfg.Locker.AddHooks(s.board.hooks())
	s.routesInit()
	s.bg.Add(1)
	go s.reap()
	return s, nil
}

// ServeHTTP serves the API: past the browser-facing checks (see
// security.go), a request's body must arrive within
// Config.BodyReadTimeout.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	securityHeaders(w.Header())
	if !s.screen(w, r) {
		return
	}
	if r.ContentLength != 0 {
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.cfg.BodyReadTimeout))
	}
	done, ok := s.proxied(w, r)
	if !ok {
		return
	}
	defer done()
	if uncleanPath(w, r) {
		return
	}
	h, pattern := s.mux.Handler(r)
	if pattern == "" {
		unmatched(w, r, h)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// unmatched answers a request that matches no route: the ServeMux's 404
// and 405 (with its Allow header) become problem documents like every
// other error; anything else it answers (a redirect from /tree to
// /tree/) passes through. A path it would clean never gets here
// (uncleanPath).
func unmatched(w http.ResponseWriter, r *http.Request, h http.Handler) {
	rec := &recorder{header: http.Header{}, code: http.StatusOK}
	h.ServeHTTP(rec, r)
	switch rec.code {
	case http.StatusNotFound:
		writeProblem(w, http.StatusNotFound, "not-found", "No such endpoint",
			fmt.Sprintf("no endpoint %s %s (the API is described at /openapi.json)", r.Method, r.URL.Path))
	case http.StatusMethodNotAllowed:
		w.Header().Set("Allow", rec.header.Get("Allow"))
		writeProblem(w, http.StatusMethodNotAllowed, "method-not-allowed", "Method not allowed",
			fmt.Sprintf("%s does not take %s; it takes %s", r.URL.Path, r.Method, rec.header.Get("Allow")))
	default:
		maps.Copy(w.Header(), rec.header)
		w.WriteHeader(rec.code)
		_, _ = w.Write(rec.body.Bytes())
	}
}

// recorder keeps what the ServeMux answers to an unmatched request.
type recorder struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (rr *recorder) Header() http.Header         { return rr.header }
func (rr *recorder) WriteHeader(code int)        { rr.code = code }
func (rr *recorder) Write(p []byte) (int, error) { return rr.body.Write(p) }

// Close lets go of every lease the server keeps, then ends the streams
// and stops the background work; acquires that complete meanwhile are
// released at once. A single server releases its leases (token-checked,
// best effort), and each stream gets its "released" event. A replica
// (Config.LeaseKeys) detaches them instead, for the replica each client
// turns to next, and each stream gets a "handoff" event. The Locker stays
// open: it is the caller's.
func (s *Server) Close() error {
	var err error
	s.closing.Do(func() {
		leases := s.leases.drain()
		if s.replicated {
			for _, ls := range leases {
				_, _ = ls.Detach()
			}
		} else {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err = dlock.ReleaseAll(ctx, leases)
			cancel()
		}
		if errors.Is(err, dlock.ErrLost) || errors.Is(err, dlock.ErrReleased) {
			err = nil
		}
		close(s.stop)
		s.bg.Wait()
		s.unhook()
	})
	return err
}

// reap lets go of the leases whose client has gone from this server: no
// open events stream and no renew within the lease's TTL (letGo).
func (s *Server) reap() {
	defer s.bg.Done()
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case now := <-t.C:
			for _, e := range s.leases.abandoned(now) {
				s.log.Info("dlock serve: client gone, letting go", "name", e.lease.Name(), "fence", e.lease.Fence(), "replica", s.replicated)
				_ = s.letGo(e.lease)
				s.leases.remove(e)
			}
		}
	}
}

// Routes lists the server's routes as "METHOD /pattern" (Go ServeMux
// patterns), for documentation and the OpenAPI check.
func (s *Server) Routes() []string { return append([]string(nil), s.routes...) }
