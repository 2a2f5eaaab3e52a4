package serve_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/dlockdev/dlock/serve"
	"github.com/dlockdev/dlock/serve/dashboard"
)

// send makes a request with the given headers ("Name", "value", ...).
func send(t *testing.T, method, target, body string, hdr ...string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(method, target, strings.NewReader(body))
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// TestCookieRequestsFromAnotherOrigin: with an admin's session cookie, a
// force-release sent from another origin of the same site (another port
// of 127.0.0.1) is refused whatever its body and media type; sent from
// the dashboard's own origin as JSON, it is served.
func TestCookieRequestsFromAnotherOrigin(t *testing.T) {
	e := newEnv(t, "mem://cross-origin", nil)
	ck := login(t, e.url, adminTok)
	cookie := ck.Name + "=" + ck.Value
	force := e.url + "/v1/locks/victim/force-release"
	for _, c := range []struct {
		name string
		hdr  []string
		body string
		want int
	}{
		{"text/plain from another port", []string{"Origin", "http://127.0.0.1:8081", "Content-Type", "text/plain"}, "{}", 403},
		{"a form from another port", []string{"Origin", "http://127.0.0.1:8081", "Content-Type", "application/x-www-form-urlencoded"}, "", 403},
		{"Sec-Fetch-Site same-site", []string{"Sec-Fetch-Site", "same-site", "Content-Type", "application/json"}, "{}", 403},
		{"Sec-Fetch-Site cross-site", []string{"Sec-Fetch-Site", "cross-site", "Origin", "https://evil.example", "Content-Type", "application/json"}, "{}", 403},
		{"a form with no Origin", []string{"Content-Type", "application/x-www-form-urlencoded"}, "", 415},
		{"text/plain with no Origin", []string{"Content-Type", "text/plain"}, "{}", 415},
		{"no Content-Type, no body", nil, "", 415},
		{"no Content-Type, a body", nil, "{}", 415},
		{"JSON from its own origin", []string{"Origin", e.url, "Sec-Fetch-Site", "same-origin", "Content-Type", "application/json"}, "{}", 200},
		{"JSON with a charset", []string{"Content-Type", "application/json; charset=utf-8"}, "{}", 200},
	} {
		resp := send(t, "POST", force, c.body, append([]string{"Cookie", cookie}, c.hdr...)...)
		if resp.StatusCode != c.want {
			t.Errorf("%s: %d, want %d", c.name, resp.StatusCode, c.want)
		}
		if resp.StatusCode >= 400 && !resp.Close {
			t.Errorf("%s: refused without Connection: close", c.name)
		}
	}
	// A bearer token cannot be sent by another origin's page: its
	// requests may omit the media type, not send another.
	if resp := send(t, "POST", force, "", "Authorization", "Bearer "+adminTok); resp.StatusCode != 200 {
		t.Errorf("bearer token, no Content-Type, no body: %d, want 200", resp.StatusCode)
	}
	if resp := send(t, "POST", force, "{}", "Authorization", "Bearer "+adminTok, "Content-Type", "text/plain"); resp.StatusCode != 415 {
		t.Errorf("bearer token, text/plain: %d, want 415", resp.StatusCode)
	}
	// Sign-in and sign-out from another origin are refused too.
	form := url.Values{"token": {adminTok}}.Encode()
	if resp := send(t, "POST", e.url+"/login", form, "Origin", "http://127.0.0.1:8081", "Content-Type", "application/x-www-form-urlencoded"); resp.StatusCode != 403 {
		t.Errorf("sign-in from another origin: %d, want 403", resp.StatusCode)
	}
	if resp := send(t, "POST", e.url+"/logout", "", "Cookie", cookie, "Sec-Fetch-Site", "same-site"); resp.StatusCode != 403 {
		t.Errorf("sign-out from another origin: %d, want 403", resp.StatusCode)
	}
}

// TestNoAuthServerRefusesBrowsers: with --insecure-no-auth (loopback),
// a page of any origin must not acquire: no cross-origin POST, no form,
// and no JSON endpoint without application/json.
func TestNoAuthServerRefusesBrowsers(t *testing.T) {
	e := newEnv(t, "mem://noauth-browsers", func(c *serve.Config) {
		c.Tokens, c.AdminTokens, c.InsecureNoAuth, c.LoopbackOnly = nil, nil, true, true
	})
	acquire := e.url + "/v1/locks/x/acquire"
	for _, c := range []struct {
		name string
		hdr  []string
		body string
		want int
	}{
		{"a form from another origin", []string{"Origin", "http://127.0.0.1:8081", "Content-Type", "application/x-www-form-urlencoded"}, "", 403},
		{"text/plain from another origin", []string{"Sec-Fetch-Site", "cross-site", "Content-Type", "text/plain"}, `{"wait_ms":0}`, 403},
		{"no Content-Type", nil, `{"wait_ms":0}`, 415},
		{"JSON", []string{"Content-Type", "application/json"}, `{"wait_ms":0}`, 200},
	} {
		if resp := send(t, "POST", acquire, c.body, c.hdr...); resp.StatusCode != c.want {
			t.Errorf("%s: %d, want %d", c.name, resp.StatusCode, c.want)
		}
	}
}

// TestLoopbackOnlyChecksHost: a loopback-only server answers to loopback
// names and addresses only (DNS rebinding brings another name).
func TestLoopbackOnlyChecksHost(t *testing.T) {
	e := newEnv(t, "mem://host-check", func(c *serve.Config) { c.LoopbackOnly = true })
	for host, want := range map[string]int{
		"127.0.0.1:7070": 200, "localhost:7070": 200, "LOCALHOST.": 200, "app.localhost:7070": 200, "[::1]:7070": 200, "127.3.4.5": 200,
		"rebind.example:7070": 421, "10.0.0.5:7070": 421, "localhost.evil.example": 421, "0.0.0.0:7070": 421, "[::ffff:10.0.0.1]:7070": 421,
	} {
		if resp := send(t, "GET", e.url+"/healthz", "", "Host", host); resp.StatusCode != want {
			t.Errorf("Host %s: %d, want %d", host, resp.StatusCode, want)
		}
	}
	other := newEnv(t, "mem://host-any", nil)
	if resp := send(t, "GET", other.url+"/healthz", "", "Host", "dlock.example:7070"); resp.StatusCode != 200 {
		t.Errorf("Host dlock.example on a server not limited to loopback: %d, want 200", resp.StatusCode)
	}
}

// TestSecurityHeaders: every answer forbids framing and cross-origin
// embedding; the pages carry their Content-Security-Policy.
func TestSecurityHeaders(t *testing.T) {
	e := newEnv(t, "mem://headers", func(c *serve.Config) { c.Dashboard = dashboard.Handler() })
	ck := login(t, e.url, clientTok)
	for _, c := range []struct {
		path, cookie, csp string
	}{
		{"/", "", "style-src 'sha256-"},
		{"/", ck.Name + "=" + ck.Value, dashboard.CSP},
		{"/static/app.js", ck.Name + "=" + ck.Value, dashboard.CSP},
		{"/v1/locks", ck.Name + "=" + ck.Value, "default-src 'none'"},
		{"/healthz", "", "default-src 'none'"},
		{"/v1/nope", "", "default-src 'none'"},
	} {
		var hdr []string
		if c.cookie != "" {
			hdr = []string{"Cookie", c.cookie}
		}
		h := send(t, "GET", e.url+c.path, "", hdr...).Header
		csp := h.Get("Content-Security-Policy")
		if !strings.Contains(csp, c.csp) || !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("GET %s: Content-Security-Policy %q, want %q and frame-ancestors 'none'", c.path, csp, c.csp)
		}
		for name, want := range map[string]string{"X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff", "Cross-Origin-Resource-Policy": "same-origin"} {
			if got := h.Get(name); got != want {
				t.Errorf("GET %s: %s %q, want %q", c.path, name, got, want)
			}
		}
	}
}
