package serve_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dlockdev/dlock/serve"
)

// listen serves srv through its Listener on a loopback port, as dlock
// serve does, and returns the address.
func listen(t *testing.T, srv *serve.Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = hs.Serve(srv.Listener(ln))
	}()
	t.Cleanup(func() {
		_ = srv.Close()
		_ = hs.Close()
		<-served
	})
	return ln.Addr().String()
}

func newServer(t *testing.T, url string, tweak func(*serve.Config)) *serve.Server {
	t.Helper()
	cfg := serve.Config{Locker: openLocker(t, url), Tokens: []string{clientTok}, AdminTokens: []string{adminTok}}
	if tweak != nil {
		tweak(&cfg)
	}
	srv, err := serve.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

func dialFrom(t *testing.T, from, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// stillOpen reports whether the server has kept c open for wait.
func stillOpen(c net.Conn, wait time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(wait))
	_, err := c.Read(make([]byte, 1))
	return errors.Is(err, os.ErrDeadlineExceeded)
}

// TestListenerCapsConnectionsPerAddress: past MaxConnsPerClient, a
// client address's connections are closed as they come; other addresses
// are served, and a place given back is taken again.
func TestListenerCapsConnectionsPerAddress(t *testing.T) {
	addr := listen(t, newServer(t, "mem://conn-cap", func(c *serve.Config) { c.MaxConnsPerClient = 8 }))
	var conns []net.Conn
	for range 50 {
		conns = append(conns, dialFrom(t, "127.0.0.2", addr))
	}
	var open []net.Conn
	for _, c := range conns {
		if stillOpen(c, 300*time.Millisecond) {
			open = append(open, c)
		}
	}
	if len(open) != 8 {
		t.Fatalf("50 connections from 127.0.0.2 with MaxConnsPerClient 8: %d kept open, want 8", len(open))
	}
	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatalf("another address with 127.0.0.2 at its bound: %v", err)
	}
	resp.Body.Close()
	_ = open[0].Close()
	time.Sleep(100 * time.Millisecond)
	if c := dialFrom(t, "127.0.0.2", addr); !stillOpen(c, 300*time.Millisecond) {
		t.Fatal("a connection from 127.0.0.2 after one of its 8 closed was refused")
	}
}

// rawRequest writes head and body on a fresh connection from 127.0.0.1
// and returns the answer's status line and how long it took.
func rawRequest(t *testing.T, addr, head, body string) (string, time.Duration, net.Conn) {
	t.Helper()
	c := dialFrom(t, "127.0.0.1", addr)
	start := time.Now()
	if _, err := io.WriteString(c, head+body); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	status, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	return strings.TrimSpace(status), time.Since(start), c
}

// TestBodyReadBounded: a body not read within BodyReadTimeout is answered
// 408 and its connection closed; a refused request's connection is
// closed at once, its body never read; the bound covers reading only: a
// wait or an events stream lasts past it.
func TestBodyReadBounded(t *testing.T) {
	const bound = 300 * time.Millisecond
	srv := newServer(t, "mem://body-bound", func(c *serve.Config) { c.BodyReadTimeout = bound })
	addr := listen(t, srv)
	slow := func(tok string) string {
		auth := ""
		if tok != "" {
			auth = "Authorization: Bearer " + tok + "\r\n"
		}
		return fmt.Sprintf("POST /v1/locks/slow/acquire HTTP/1.1\r\nHost: %s\r\n%sContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n", addr, auth)
	}
	status, took, c := rawRequest(t, addr, slow(clientTok), "{")
	if !strings.Contains(status, " 408 ") || took < bound || took > 10*time.Second {
		t.Errorf("an authenticated body sent slowly: %q after %s, want 408 after the %s bound", status, took, bound)
	}
	if stillOpen(c, time.Second) {
		t.Error("the connection of a body too slow is still open")
	}
	status, took, c = rawRequest(t, addr, slow(""), "{")
	if !strings.Contains(status, " 401 ") || took > bound {
		t.Errorf("a body without a token: %q after %s, want 401 at once", status, took)
	}
	if stillOpen(c, time.Second) {
		t.Error("the connection of a request refused 401 is still open (its body is being read)")
	}

	base := "http://" + addr
	call := func(method, path, body string) (int, string) {
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+clientTok)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := call("POST", "/v1/locks/held/acquire", `{"wait_ms":0,"ttl_ms":30000}`); code != 200 {
		t.Fatalf("acquire: %d", code)
	}
	start := time.Now()
	if code, body := call("POST", "/v1/locks/held/acquire", `{"wait_ms":1500}`); code != 409 || time.Since(start) < 1500*time.Millisecond {
		t.Errorf("a 1.5 s wait with a %s body bound: %d %s after %s, want 409 after the wait", bound, code, body, time.Since(start))
	}
}

// TestProxiedRequestsCappedPerClient: behind a trusted proxy, the bound
// on one client address applies to its requests in flight, told apart
// by X-Forwarded-For; the proxy's own connections are not capped.
func TestProxiedRequestsCappedPerClient(t *testing.T) {
	srv := newServer(t, "mem://proxied-cap", func(c *serve.Config) {
		c.MaxConnsPerClient = 4
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	})
	base := "http://" + listen(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	open := func(client string) int {
		req, _ := http.NewRequestWithContext(ctx, "GET", base+"/v1/dashboard/stream", nil)
		req.Header.Set("Authorization", "Bearer "+clientTok)
		req.Header.Set("X-Forwarded-For", client)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 {
			resp.Body.Close()
		}
		return resp.StatusCode
	}
	for i := range 4 {
		if code := open("203.0.113.9"); code != 200 {
			t.Fatalf("stream %d of 203.0.113.9: %d", i+1, code)
		}
	}
	if code := open("203.0.113.9"); code != 429 {
		t.Errorf("a 5th request in flight for 203.0.113.9 with MaxConnsPerClient 4: %d, want 429", code)
	}
	for i := range 4 {
		if code := open("203.0.113.10"); code != 200 {
			t.Errorf("stream %d of another client through the same proxy: %d, want 200", i+1, code)
		}
	}
}
