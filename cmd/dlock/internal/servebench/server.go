package servebench

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/serve"
)

// server is a serve.Server on a loopback TCP listener, with the clients
// that talk to it.
type server struct {
	srv     *serve.Server
	hs      *http.Server
	served  chan error
	api     *api         // workloads and admin calls (keep-alive connections)
	streams *http.Client // one connection per events stream
	tr      *http.Transport
}

// Rate limits high enough never to throttle a benchmark client.
const (
	unlimitedRate  = 1e9
	unlimitedBurst = 1 << 30
)

// startServer serves l's API on 127.0.0.1, as dlock serve does, and
// builds the clients.
func startServer(l *dlock.Locker) (*server, error) {
	token, admin := randomHex(16), randomHex(16)
	srv, err := serve.New(serve.Config{
		Locker: l, Tokens: []string{token}, AdminTokens: []string{admin},
		RatePerSecond: unlimitedRate, Burst: unlimitedBurst,
	})
	if err != nil {
		return nil, fmt.Errorf("servebench: start the server: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = srv.Close()
		return nil, fmt.Errorf("servebench: listen on loopback: %w", err)
	}
	s := &server{srv: srv, served: make(chan error, 1)}
	s.hs = &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	go func() { s.served <- s.hs.Serve(ln) }()
	s.tr = newTransport(0)
	s.api = &api{base: "http://" + ln.Addr().String(), token: token, admin: admin, wire: newWire(ln.Addr().String())}
	s.streams = &http.Client{Transport: s.tr}
	return s, nil
}

// newTransport is a plain HTTP/1.1 keep-alive transport keeping up to
// idle connections to the server.
func newTransport(idle int) *http.Transport {
	d := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	return &http.Transport{
		DialContext:         d.DialContext,
		MaxIdleConns:        idle,
		MaxIdleConnsPerHost: idle,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
	}
}

// close ends the API server (its leases released, its streams ended),
// then the HTTP server and the clients' connections.
func (s *server) close() {
	_ = s.srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.hs.Shutdown(ctx); err != nil {
		_ = s.hs.Close()
	}
	<-s.served // http.ErrServerClosed, or the listener's failure: the figures already tell
	s.api.wire.close()
	s.tr.CloseIdleConnections()
}
