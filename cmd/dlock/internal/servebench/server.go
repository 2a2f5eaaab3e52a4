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
	api     *api         // workloads and admin calls (keep-alive pool)
	streams *http.Client // one connection per events stream
	tr      []*http.Transport
}

// Rate limits high enough never to throttle a benchmark client.
const (
	unlimitedRate  = 1e9
	unlimitedBurst = 1 << 30
)

// startServer serves l's API on 127.0.0.1 and builds the clients; workers
// is the number of concurrent requests the workload pool must keep alive.
func startServer(l *dlock.Locker, workers int) (*server, error) {
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
	s.hs = &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	go func() { s.served <- s.hs.Serve(ln) }()
	pool := newTransport(2*workers + 16)
	streams := newTransport(0)
	s.tr = []*http.Transport{pool, streams}
	s.api = &api{base: "http://" + ln.Addr().String(), token: token, admin: admin, hc: &http.Client{Transport: pool}}
	s.streams = &http.Client{Transport: streams}
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
	for _, tr := range s.tr {
		tr.CloseIdleConnections()
	}
}
