package serve_test

import (
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
)

// login signs in with tok through the form and returns the session
// cookie.
func login(t *testing.T, base, tok string) *http.Cookie {
	t.Helper()
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.PostForm(base+"/login", url.Values{"token": {tok}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) != 1 {
		t.Fatalf("login: %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
	return resp.Cookies()[0]
}

// TestSessionFloodKeepsOtherSessions: a client token signing in 10,001
// times (past the session store's bound) never signs an admin out: only
// that token's own oldest sessions give way.
func TestSessionFloodKeepsOtherSessions(t *testing.T) {
	e := newEnv(t, "mem://session-flood", nil)
	admin := login(t, e.url, adminTok)
	first := login(t, e.url, clientTok)
	var failed atomic.Int64
	var wg sync.WaitGroup
	const n, workers = 10001, 8
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				resp, err := http.PostForm(e.url+"/login", url.Values{"token": {clientTok}})
				if err != nil {
					failed.Add(1)
					continue
				}
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
	if failed.Load() > 0 {
		t.Fatalf("%d of %d logins failed", failed.Load(), n)
	}
	get := func(c *http.Cookie) int {
		req, _ := http.NewRequest("GET", e.url+"/v1/dashboard", nil)
		req.AddCookie(c)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := get(admin); code != 200 {
		t.Errorf("the admin's session after %d sign-ins with a client token: %d, want 200", n, code)
	}
	if code := get(first); code != 401 {
		t.Errorf("the client token's first session after %d more: %d, want 401 (the oldest gives way)", n, code)
	}
}
