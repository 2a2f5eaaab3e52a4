package serve_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	_ "github.com/dlockdev/dlock/filelock"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	_ "github.com/dlockdev/dlock/memlock"
	_ "github.com/dlockdev/dlock/redislock"
	"github.com/dlockdev/dlock/serve"
)

const (
	clientTok = "client-token-0123456789abcdef"
	adminTok  = "admin-token-0123456789abcdef"
	// wrongTok is refused, and is a secret all the same: a mistyped token
	// is most of a real one.
	wrongTok = "wrong-token-0123456789abcdef"
)

// env is a server under test on a real backend, with its log captured.
type env struct {
	t   *testing.T
	url string
	srv *serve.Server
	// locker is the server's Locker, for checks behind its back.
	locker *dlock.Locker
	logs   *syncBuf
	all    *syncBuf // every response body, to look for secrets
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// backends are the URLs each test runs on: the in-process backend and a
// real Redis server.
func backends(t *testing.T) map[string]func() string {
	return map[string]func() string{
		"mem":   func() string { return fmt.Sprintf("mem://serve-%d", time.Now().UnixNano()) },
		"redis": func() string { return testserver.Redis(t).URL() },
	}
}

func eachBackend(t *testing.T, fn func(t *testing.T, e *env)) {
	eachOf(t, backends(t), fn)
}

// withFile adds the file backend (SQLite), which has no eviction push.
func withFile(t *testing.T, bs map[string]func() string) map[string]func() string {
	bs["file"] = func() string { return "file://" + filepath.Join(t.TempDir(), "locks.db") }
	return bs
}

func eachOf(t *testing.T, bs map[string]func() string, fn func(t *testing.T, e *env)) {
	for name, url := range bs {
		t.Run(name, func(t *testing.T) { fn(t, newEnv(t, url(), nil)) })
	}
}

func newEnv(t *testing.T, url string, tweak func(*serve.Config)) *env {
	t.Helper()
	l, err := dlock.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, logs: &syncBuf{}, all: &syncBuf{}}
	cfg := serve.Config{Locker: l, Tokens: []string{clientTok}, AdminTokens: []string{adminTok},
		Logger: slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	if tweak != nil {
		tweak(&cfg)
	}
	srv, err := serve.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	e.url, e.srv, e.locker = ts.URL, srv, l
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("Server.Close: %v", err)
		}
		ts.CloseClientConnections()
		ts.Close()
		_ = l.Close()
		for _, secret := range []string{clientTok, adminTok, wrongTok, otherTok} {
			if strings.Contains(e.logs.String(), secret) || strings.Contains(e.all.String(), secret) {
				t.Errorf("a token appeared in the server's log or a response")
			}
		}
	})
	return e
}

// call makes a request and decodes the JSON answer into out (if non-nil).
func (e *env) call(method, path, token string, body any, out any) (int, http.Header) {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		js, _ := json.Marshal(b)
		rd = bytes.NewReader(js)
	}
	req, err := http.NewRequest(method, e.url+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	_, _ = e.all.Write(data)
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			e.t.Fatalf("%s %s: %d %q: %v", method, path, resp.StatusCode, data, err)
		}
	}
	return resp.StatusCode, resp.Header
}

type lease struct {
	LeaseID string `json:"lease_id"`
	Name    string `json:"name"`
	Kind    string `json:"kind"`
	Fence   uint64 `json:"fence"`
	TTLms   int64  `json:"ttl_ms"`
	Slot    int    `json:"slot"`
	State   string `json:"state"`
}

type problem struct {
	Type   string         `json:"type"`
	Status int            `json:"status"`
	Detail string         `json:"detail"`
	Reason string         `json:"reason"`
	Holder map[string]any `json:"holder"`
}

func (e *env) acquire(name string, body any) lease {
	e.t.Helper()
	var ls lease
	if code, _ := e.call("POST", "/v1/locks/"+name+"/acquire", clientTok, body, &ls); code != 200 {
		e.t.Fatalf("acquire %s: status %d", name, code)
	}
	return ls
}

// sseEvent is one event read from a stream.
type sseEvent struct {
	name, data string
	at         time.Time
}

// stream opens an events stream and delivers its events on a channel.
func (e *env) stream(path string) (<-chan sseEvent, func()) {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", e.url+path, nil)
	req.Header.Set("Authorization", "Bearer "+clientTok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		e.t.Fatalf("stream %s: %d %s", path, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	ch := make(chan sseEvent, 64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(ch)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				ev.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				ev.data = strings.TrimPrefix(line, "data: ")
			case line == "" && ev.name != "":
				ev.at = time.Now()
				ch <- ev
				ev = sseEvent{}
			}
		}
	}()
	return ch, func() { cancel(); <-done }
}

func next(t *testing.T, ch <-chan sseEvent, within time.Duration) sseEvent {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatal("stream ended")
		}
		return ev
	case <-time.After(within):
		t.Fatalf("no event within %s", within)
	}
	return sseEvent{}
}

// pathEscape escapes s as one path segment.
func pathEscape(s string) string { return url.PathEscape(s) }

// jsonString is s as a JSON string literal.
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// releaseAll releases every lease held on the locker behind the server's
// back (the library-side acquires of a test).
func releaseAll(e *env) {
	hs, _ := e.locker.List(context.Background(), "")
	for _, h := range hs {
		_, _, _, _ = e.locker.ForceRelease(context.Background(), h.Name)
	}
}
