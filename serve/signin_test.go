package serve_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/dlockdev/dlock/serve"
	"github.com/dlockdev/dlock/serve/dashboard"
)

// withDashboard serves the dashboard.
func withDashboard(c *serve.Config) { c.Dashboard = dashboard.Handler() }

// browserGet is a browser's GET: headers as given, redirects not
// followed, an optional cookie.
func browserGet(t *testing.T, url string, cookie *http.Cookie, hdr ...string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	if cookie != nil {
		req.AddCookie(cookie)
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

func sessionCookie(resp *http.Response) *http.Cookie {
	for _, c := range resp.Cookies() {
		if c.Name == "dlock_session" && c.Value != "" {
			return c
		}
	}
	return nil
}

// TestSignInLinkOnce: a sign-in link opened in a browser sets a Strict,
// HttpOnly session cookie and redirects to the dashboard; the session
// has the admin role; the same link a second time signs nobody in; the
// code never reaches the log.
func TestSignInLinkOnce(t *testing.T) {
	e := newEnv(t, "mem://signin-once", withDashboard)
	path, err := e.srv.SignInLink()
	if err != nil {
		t.Fatal(err)
	}
	code := strings.TrimPrefix(path, "/signin?t=")
	if len(code) < 32 || code == path {
		t.Fatalf("SignInLink = %q, want /signin?t= and a 128-bit code", path)
	}
	resp, body := browserGet(t, e.url+path, nil, "Sec-Fetch-Site", "none")
	ck := sessionCookie(resp)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" || ck == nil {
		t.Fatalf("open the link: %d Location %q cookies %v %q; want 303 to / with dlock_session", resp.StatusCode, resp.Header.Get("Location"), resp.Cookies(), body)
	}
	if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || resp.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("cookie %+v, Cache-Control %q; want HttpOnly, SameSite=Strict, no-store", ck, resp.Header.Get("Cache-Control"))
	}
	if resp, body := browserGet(t, e.url+"/", ck); resp.StatusCode != 200 || !strings.Contains(body, `id="holders"`) {
		t.Errorf("the dashboard with the link's cookie: %d, want the dashboard page", resp.StatusCode)
	}
	// The session is an admin's: it may force-release.
	req, _ := http.NewRequest("POST", e.url+"/v1/locks/x/force-release", strings.NewReader(`{}`))
	req.Header.Set("Content-Type", "application/json")
	req.AddCookie(ck)
	if r, err := http.DefaultClient.Do(req); err != nil || r.StatusCode != 200 {
		t.Errorf("force-release with the link's session: %v %v, want 200 (an admin session)", r.Status, err)
	} else {
		r.Body.Close()
	}
	resp, body = browserGet(t, e.url+path, nil, "Sec-Fetch-Site", "none")
	if resp.StatusCode != http.StatusUnauthorized || sessionCookie(resp) != nil || !strings.Contains(body, "not valid") {
		t.Errorf("the link a second time: %d cookie %v, want 401 and no session", resp.StatusCode, sessionCookie(resp))
	}
	if strings.Contains(e.logs.String(), code) {
		t.Errorf("the sign-in code appeared in the server's log")
	}
}

// TestSignInLinkNotFromAnotherSite: a page of another site (or another
// port of this host) that links or redirects to a sign-in link cannot
// sign its visitor in to the session the link starts (login CSRF): the
// request is refused before the code is looked at, and the code still
// works when opened from outside the browser.
func TestSignInLinkNotFromAnotherSite(t *testing.T) {
	e := newEnv(t, "mem://signin-xsite", withDashboard)
	path, _ := e.srv.SignInLink()
	for _, site := range []string{"cross-site", "same-site"} {
		resp, _ := browserGet(t, e.url+path, nil, "Sec-Fetch-Site", site, "Sec-Fetch-Mode", "navigate")
		if resp.StatusCode != http.StatusForbidden || sessionCookie(resp) != nil {
			t.Errorf("the link followed from a %s page: %d cookie %v, want 403 and no session", site, resp.StatusCode, sessionCookie(resp))
		}
	}
	if resp, _ := browserGet(t, e.url+path, nil); resp.StatusCode != http.StatusSeeOther || sessionCookie(resp) == nil {
		t.Errorf("the link opened after the refusals: %d, want 303 with a session", resp.StatusCode)
	}
}

// TestSignInLinkGuessesLimited: wrong codes count as failed
// authentications of the address; past the limit every sign-in from it
// is 429, a valid link included, before its code is looked at.
func TestSignInLinkGuessesLimited(t *testing.T) {
	e := newEnv(t, "mem://signin-guess", withDashboard)
	path, _ := e.srv.SignInLink()
	codes := map[int]int{}
	for i := range 50 {
		resp, _ := browserGet(t, e.url+"/signin?t=guess"+strings.Repeat("0", i%7), nil)
		codes[resp.StatusCode]++
	}
	if codes[http.StatusTooManyRequests] == 0 || codes[http.StatusUnauthorized] > 20 {
		t.Errorf("50 wrong codes from one address: %v, want 429 after the first few 401", codes)
	}
	resp, _ := browserGet(t, e.url+path, nil)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Errorf("a valid link from the blocked address: %d, want 429 with Retry-After", resp.StatusCode)
	}
}

// TestSignInLinksOnDemand: POST /v1/signin-links makes a link for its
// caller, with the caller's role; without a token it is refused.
func TestSignInLinksOnDemand(t *testing.T) {
	e := newEnv(t, "mem://signin-demand", withDashboard)
	var out struct{ URL, Path string }
	if code, _ := e.call("POST", "/v1/signin-links", clientTok, ``, &out); code != http.StatusCreated || !strings.HasPrefix(out.URL, e.url+"/signin?t=") {
		t.Fatalf("POST /v1/signin-links with a client token: %d %+v, want 201 and a link on %s", code, out, e.url)
	}
	resp, _ := browserGet(t, out.URL, nil)
	ck := sessionCookie(resp)
	if resp.StatusCode != http.StatusSeeOther || ck == nil {
		t.Fatalf("open the link: %d, want 303 with a session", resp.StatusCode)
	}
	req, _ := http.NewRequest("POST", e.url+"/v1/locks/x/force-release", strings.NewReader(`{}`))
	req.Header.Set("Content-Type", "application/json")
	req.AddCookie(ck)
	if r, err := http.DefaultClient.Do(req); err != nil || r.StatusCode != http.StatusForbidden {
		t.Errorf("force-release with a client's link session: %v %v, want 403", r.Status, err)
	} else {
		r.Body.Close()
	}
	if code, _ := e.call("POST", "/v1/signin-links", "", ``, nil); code != http.StatusUnauthorized {
		t.Errorf("POST /v1/signin-links without a token: %d, want 401", code)
	}
}
