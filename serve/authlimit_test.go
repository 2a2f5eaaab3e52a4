package serve_test

import (
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"github.com/dlockdev/dlock/serve"
)

// from makes a request as the client at addr, behind the test's proxy
// (X-Forwarded-For), with the bearer token tok.
func from(t *testing.T, method, target, addr, tok string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(method, target, nil)
	if addr != "" {
		req.Header.Set("X-Forwarded-For", addr)
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// TestFailedAuthIsLimited: wrong bearer tokens and wrong sign-ins are
// limited per client address (a small burst, then 429 with
// Retry-After, for every authenticated request from that address), and
// other addresses are served meanwhile. Behind a trusted proxy the
// address is the one it forwards.
func TestFailedAuthIsLimited(t *testing.T) {
	e := newEnv(t, "mem://auth-limit", func(c *serve.Config) {
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	})
	codes := map[int]int{}
	retry := ""
	for range 300 {
		resp := from(t, "GET", e.url+"/v1/locks", "203.0.113.5", wrongTok)
		codes[resp.StatusCode]++
		if resp.StatusCode == 429 {
			retry = resp.Header.Get("Retry-After")
		}
	}
	if codes[401] > 20 || codes[429] < 280 || retry == "" {
		t.Fatalf("300 wrong tokens at once from one address: %v (Retry-After %q), want at most 20 401s, then 429 with Retry-After", codes, retry)
	}
	t.Logf("300 wrong tokens at once from one address: %v, Retry-After %s", codes, retry)
	// The attacker's address is refused even with a right token, so
	// guessing learns nothing; another address is served.
	if code := from(t, "GET", e.url+"/v1/locks", "203.0.113.5", clientTok).StatusCode; code != 429 {
		t.Errorf("the right token from the limited address: %d, want 429", code)
	}
	if code := from(t, "GET", e.url+"/v1/locks", "203.0.113.6", clientTok).StatusCode; code != 200 {
		t.Errorf("the right token from another address: %d, want 200", code)
	}
	// Sign-in guesses share the address's budget.
	form := url.Values{"token": {wrongTok}}
	logins := map[int]int{}
	for i := range 300 {
		req, _ := http.NewRequest("POST", e.url+"/login", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("X-Forwarded-For", fmt.Sprintf("198.51.100.%d, 203.0.113.7", i%250))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		logins[resp.StatusCode]++
	}
	if logins[401] > 20 || logins[429] < 280 {
		t.Errorf("300 wrong sign-ins from one address (forging the rest of X-Forwarded-For): %v, want at most 20 401s, then 429", logins)
	}
}

// TestForwardedForFromUntrustedPeerIgnored: without trusted proxies,
// X-Forwarded-For names nobody: a client cannot escape its limit by
// writing a new address in it each time.
func TestForwardedForFromUntrustedPeerIgnored(t *testing.T) {
	e := newEnv(t, "mem://auth-limit-xff", nil)
	codes := map[int]int{}
	for i := range 300 {
		codes[from(t, "GET", e.url+"/v1/locks", fmt.Sprintf("198.51.100.%d", i%250), wrongTok).StatusCode]++
	}
	if codes[401] > 20 || codes[429] < 280 {
		t.Fatalf("300 wrong tokens, each with another X-Forwarded-For, from an untrusted peer: %v, want at most 20 401s", codes)
	}
}
