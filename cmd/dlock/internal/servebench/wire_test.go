package servebench

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// wireServer counts the connections it accepts; /close answers with
// Connection: close, /wait answers when the client has gone.
func wireServer(t *testing.T) (*httptest.Server, *atomic.Int64) {
	var conns atomic.Int64
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		switch r.URL.Path {
		case "/close":
			w.Header().Set("Connection", "close")
		case "/wait":
			<-r.Context().Done()
			return
		}
		_, _ = w.Write([]byte(r.Method + " " + string(body)))
	}))
	ts.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	ts.Start()
	t.Cleanup(ts.Close)
	return ts, &conns
}

// TestWireKeepsConnectionsAlive: requests in sequence share one
// connection, with their method, token and body; an answer with
// Connection: close is the last on its connection.
func TestWireKeepsConnectionsAlive(t *testing.T) {
	ts, conns := wireServer(t)
	w := newWire(ts.Listener.Addr().String())
	defer w.close()
	ctx := context.Background()
	for i := range 5 {
		code, data, err := w.do(ctx, http.MethodPost, "/x", "tok", []byte(`{"a":1}`))
		if err != nil || code != 200 || string(data) != `POST {"a":1}` {
			t.Fatalf("request %d: %d %q %v", i, code, data, err)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("5 requests in sequence used %d connections, want 1", n)
	}
	if _, _, err := w.do(ctx, http.MethodDelete, "/close", "tok", nil); err != nil {
		t.Fatal(err)
	}
	if code, data, err := w.do(ctx, http.MethodDelete, "/x", "tok", nil); err != nil || code != 200 || string(data) != "DELETE " {
		t.Fatalf("after Connection: close: %d %q %v", code, data, err)
	}
	if n := conns.Load(); n != 2 {
		t.Errorf("after an answer with Connection: close: %d connections, want 2", n)
	}
}

// TestWireCanceled: a request whose context ends returns the context's
// error without waiting for the answer, and its connection is not
// reused.
func TestWireCanceled(t *testing.T) {
	ts, conns := wireServer(t)
	w := newWire(ts.Listener.Addr().String())
	defer w.close()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, _, err := w.do(ctx, http.MethodPost, "/wait", "tok", nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("canceled request: %v, want context.DeadlineExceeded", err)
	}
	if _, data, err := w.do(context.Background(), http.MethodGet, "/x", "tok", nil); err != nil || !strings.HasPrefix(string(data), "GET") {
		t.Fatalf("next request: %q %v", data, err)
	}
	if n := conns.Load(); n != 2 {
		t.Errorf("the canceled request's connection was reused: %d connections, want 2", n)
	}
}
