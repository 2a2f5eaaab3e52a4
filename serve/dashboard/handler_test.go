package dashboard_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/dlockdev/dlock/serve/dashboard"
)

func get(t *testing.T, h http.Handler, method, path string, hdr ...string) *http.Response {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

func TestHandlerServesAssets(t *testing.T) {
	h := dashboard.Handler()
	for _, tc := range []struct{ path, ctype, contains string }{
		{"/", "text/html; charset=utf-8", `<table id="holders">`},
		{"/static/app.js", "text/javascript; charset=utf-8", "/v1/dashboard/stream"},
		{"/static/style.css", "text/css; charset=utf-8", "#status"},
		{"/static/favicon.svg", "image/svg+xml", "<svg"},
	} {
		resp := get(t, h, http.MethodGet, tc.path)
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: status %d, want 200", tc.path, resp.StatusCode)
			continue
		}
		if got := resp.Header.Get("Content-Type"); got != tc.ctype {
			t.Errorf("GET %s: Content-Type %q, want %q", tc.path, got, tc.ctype)
		}
		if got := resp.Header.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("GET %s: X-Content-Type-Options %q, want nosniff", tc.path, got)
		}
		if !strings.Contains(string(body), tc.contains) {
			t.Errorf("GET %s: body lacks %q", tc.path, tc.contains)
		}
	}
}

func TestHandlerNotFound(t *testing.T) {
	h := dashboard.Handler()
	for _, path := range []string{
		"/static/nope.js", "/static/", "/static/index.html", "/index.html",
		"/app.js", "/static/assets/app.js", "/v1/dashboard",
	} {
		if resp := get(t, h, http.MethodGet, path); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: status %d, want 404", path, resp.StatusCode)
		}
	}
	if resp := get(t, h, http.MethodPost, "/"); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /: status %d, want 405", resp.StatusCode)
	}
}

// TestHandlerRevalidates: the assets carry an ETag and no-cache, so a
// browser revalidates cheaply and sees a new binary's page at once.
func TestHandlerRevalidates(t *testing.T) {
	h := dashboard.Handler()
	resp := get(t, h, http.MethodGet, "/static/app.js")
	etag := resp.Header.Get("ETag")
	if etag == "" || resp.Header.Get("Cache-Control") != "no-cache" {
		t.Fatalf("GET /static/app.js: ETag %q, Cache-Control %q; want an ETag and no-cache", etag, resp.Header.Get("Cache-Control"))
	}
	if resp := get(t, h, http.MethodGet, "/static/app.js", "If-None-Match", etag); resp.StatusCode != http.StatusNotModified {
		t.Errorf("GET with If-None-Match %s: status %d, want 304", etag, resp.StatusCode)
	}
	if resp := get(t, h, http.MethodHead, "/"); resp.StatusCode != http.StatusOK {
		t.Errorf("HEAD /: status %d, want 200", resp.StatusCode)
	}
}

// TestPageHasNoInlineCode keeps the page loadable under a strict CSP
// (script-src 'self'; style-src 'self'): no inline script, style or handler.
func TestPageHasNoInlineCode(t *testing.T) {
	body, _ := io.ReadAll(get(t, dashboard.Handler(), http.MethodGet, "/").Body)
	page := strings.ToLower(string(body))
	for _, bad := range []string{"<script>", "<style", " style=", " onclick=", " onload=", " onerror=", "javascript:", "http://", "https://"} {
		if strings.Contains(page, bad) {
			t.Errorf("index.html contains %q", bad)
		}
	}
	js, _ := io.ReadAll(get(t, dashboard.Handler(), http.MethodGet, "/static/app.js").Body)
	for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"} {
		if strings.Contains(string(js), bad) {
			t.Errorf("app.js uses %s", bad)
		}
	}
}
