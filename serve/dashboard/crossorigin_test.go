package dashboard_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/chromedp"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/serve"
	"github.com/dlockdev/dlock/serve/dashboard"
)

// attackPage is served on another origin (another port of 127.0.0.1: the
// same site, so a SameSite=Strict cookie goes along). It aims forms and
// fetches at the dlock servers named in its query (a: signed-in admin,
// c: no authentication) and titles itself "done" when all have settled.
const attackPage = `<!doctype html><html><head><title>attack</title></head><body>
<iframe name="s1"></iframe><iframe name="s2"></iframe><iframe name="s3"></iframe><iframe name="s4"></iframe>
<script>
const q = new URLSearchParams(location.search);
const A = q.get("a"), C = q.get("c");
function form(action, enctype, fields, sink) {
  return new Promise((done) => {
    const f = document.createElement("form");
    f.method = "post"; f.action = action; f.target = sink;
    if (enctype) f.enctype = enctype;
    for (const [k, v] of Object.entries(fields)) {
      const i = document.createElement("input");
      i.type = "hidden"; i.name = k; i.value = v; f.append(i);
    }
    document.querySelector("iframe[name=" + sink + "]").addEventListener("load", () => done("loaded"), { once: true });
    setTimeout(() => done("timeout"), 5000);
    document.body.append(f);
    f.submit();
  });
}
// Simple requests: no preflight, the cookie goes along. url(i) is the
// i-th request's URL.
function fetches(url, body) {
  const o = { method: "POST", mode: "no-cors", credentials: "include" };
  return [
    fetch(url(0), { ...o, headers: { "Content-Type": "text/plain" }, body }),
    fetch(url(1), { ...o, body: new Blob([body]) }), // no Content-Type at all
    fetch(url(2), o), // no body
  ];
}
// The dashboard's own force-release, sent from this page: JSON with the
// session cookie. The browser asks the server first (a CORS preflight),
// which grants nothing, so the POST itself is never sent.
function likeTheDashboard(url) {
  return fetch(url, { method: "POST", credentials: "include",
    headers: { "Content-Type": "application/json", Accept: "application/json" }, body: "{}" });
}
const same = (u) => () => u;
const each = (u) => (i) => u + "-" + i + "/acquire";
// text/plain forms send "name=value": the "=" lands inside the owner.
const owner = { '{"ttl_ms":60000,"wait_ms":0,"owner":"x': 'y"}' };
Promise.allSettled([
  form(A + "/v1/locks/victim/force-release", "", {}, "s1"),
  form(A + "/v1/locks/csrf-text/acquire", "text/plain", owner, "s2"),
  ...fetches(same(A + "/v1/locks/victim/force-release"), "{}"),
  likeTheDashboard(A + "/v1/locks/victim/force-release"),
  ...fetches(each(A + "/v1/locks/csrf-fetch"), '{"ttl_ms":60000,"wait_ms":0}'),
  form(C + "/v1/locks/csrf-noauth-form/acquire", "", {}, "s3"),
  form(C + "/v1/locks/csrf-noauth-text/acquire", "text/plain", owner, "s4"),
  ...fetches(each(C + "/v1/locks/csrf-noauth-fetch"), '{"ttl_ms":60000,"wait_ms":0}'),
]).then(() => { document.title = "done"; });
</script></body></html>`

// seen is one state-changing request a server received.
type seen struct {
	Method, Path, Origin, Site, Type string
	Status                           int
}

// recorder notes every POST and DELETE and the status it was answered.
type recorder struct {
	mu   sync.Mutex
	reqs []seen
}

func (rec *recorder) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			h.ServeHTTP(w, r)
			return
		}
		sw := &statusWriter{ResponseWriter: w, status: 200}
		h.ServeHTTP(sw, r)
		rec.mu.Lock()
		rec.reqs = append(rec.reqs, seen{r.Method, r.URL.Path, r.Header.Get("Origin"), r.Header.Get("Sec-Fetch-Site"), r.Header.Get("Content-Type"), sw.status})
		rec.mu.Unlock()
	})
}

// from returns the requests whose Origin is origin.
func (rec *recorder) from(origin string) []seen {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var out []seen
	for _, s := range rec.reqs {
		if s.Origin == origin {
			out = append(out, s)
		}
	}
	return out
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int)        { w.status = code; w.ResponseWriter.WriteHeader(code) }
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
func (w *statusWriter) Flush()                      { w.ResponseWriter.(http.Flusher).Flush() }

// dlockServer is a server of the dashboard test with its own locker.
type dlockServer struct {
	base   string
	locker *dlock.Locker
	rec    *recorder
}

func startDlock(t *testing.T, name string, tweak func(*serve.Config)) *dlockServer {
	t.Helper()
	locker, err := dlock.Open(context.Background(), fmt.Sprintf("mem://%s-%d", name, time.Now().UnixNano()))
	if err != nil {
		t.Fatal(err)
	}
	cfg := serve.Config{Locker: locker, Dashboard: dashboard.Handler(), LoopbackOnly: true}
	tweak(&cfg)
	srv, err := serve.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	ts := httptest.NewServer(rec.wrap(srv))
	t.Cleanup(func() {
		_ = srv.Close()
		ts.Close()
		_ = locker.Close()
	})
	return &dlockServer{base: ts.URL, locker: locker, rec: rec}
}

// held lists the names held on s's backend.
func (s *dlockServer) held(t *testing.T) map[string]uint64 {
	t.Helper()
	return heldNames(t, s.locker)
}

// TestCrossOriginRequestsRefused: a page on another origin of the same
// site posts forms and fetches at a dashboard signed in as admin, and at
// a server without authentication: every one arrives and is refused,
// nothing is released or acquired. A page whose name resolves to
// 127.0.0.1 (DNS rebinding) is refused too. The dashboard's own requests
// still work: a force-release from its page, and sign-out.
func TestCrossOriginRequestsRefused(t *testing.T) {
	chromium := chromiumPath(t)
	a := startDlock(t, "csrf-admin", func(c *serve.Config) {
		c.Tokens, c.AdminTokens = []string{clientToken}, []string{adminToken}
	})
	c := startDlock(t, "csrf-noauth", func(c *serve.Config) { c.InsecureNoAuth = true })
	attacker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(attackPage))
	}))
	defer attacker.Close()
	api := &apiClient{base: a.base}
	victim := api.acquire(t, "victim", "cron/victim")

	ctx := startBrowser(t, chromium)
	signInWith(t, ctx, a.base, adminToken)
	waitJS(t, ctx, "the stream is live", `document.getElementById("status").textContent === "live"`)

	target := attacker.URL + "/?" + url.Values{"a": {a.base}, "c": {c.base}}.Encode()
	if err := do(ctx, chromedp.Navigate(target)); err != nil {
		t.Fatalf("open the page on another origin: %v", err)
	}
	waitJS(t, ctx, "the page's requests to settle", `document.title === "done"`)
	time.Sleep(500 * time.Millisecond) // the last form posts reach the servers

	for _, s := range []struct {
		srv  *dlockServer
		want int
	}{{a, 9}, {c, 5}} {
		got := s.srv.rec.from(attacker.URL)
		if len(got) < s.want {
			t.Errorf("%s received %d requests from the other origin, want at least %d (the test would be blind): %+v", s.srv.base, len(got), s.want, got)
		}
		for _, r := range got {
			if r.Status < 400 {
				t.Errorf("%s answered %d to %s %s from %s (Sec-Fetch-Site %q, Content-Type %q), want a refusal", s.srv.base, r.Status, r.Method, r.Path, r.Origin, r.Site, r.Type)
			}
		}
	}
	if !slices.ContainsFunc(a.rec.from(attacker.URL), func(r seen) bool { return r.Method == http.MethodOptions }) {
		t.Errorf("the admin's server got no preflight for the dashboard's own request sent from the other origin (the test would be blind)")
	}
	if held := a.held(t); held["victim"] != victim.Fence || len(held) != 1 {
		t.Errorf("after the other origin's requests the admin's server holds %v, want victim at fence %d and nothing else", held, victim.Fence)
	}
	if held := c.held(t); len(held) != 0 {
		t.Errorf("after the other origin's requests the server without authentication holds %v, want nothing", held)
	}

	checkRebinding(t, ctx, c)
	checkOwnRequests(t, ctx, a, victim)
}

// checkRebinding plays DNS rebinding: a page is served as
// http://rebind.test:PORT/attack by the attacker (the browser intercepts
// it), then the name resolves to 127.0.0.1 (the browser maps rebind.test
// there), so the page's fetches of its own origin reach the server
// without authentication on that port. Only the Host check stands
// between them.
func checkRebinding(t *testing.T, browser context.Context, c *dlockServer) {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser)
	defer cancel()
	u, _ := url.Parse(c.base)
	rebound := "http://rebind.test:" + u.Port()
	pattern := []*fetch.RequestPattern{{URLPattern: rebound + "/attack"}}
	if _, err := chromedp.Call(ctx, fetch.Enable, fetch.EnableParams{Patterns: pattern}); err != nil {
		t.Fatalf("fetch.enable: %v", err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() {
		for ev, err := range chromedp.Events(ctx, fetch.RequestPaused) {
			if err != nil {
				return
			}
			_, _ = chromedp.Call(ctx, fetch.FulfillRequest, fetch.FulfillRequestParams{RequestID: ev.RequestID, ResponseCode: 200,
				ResponseHeaders: []*fetch.HeaderEntry{{Name: "Content-Type", Value: "text/html"}},
				Body:            []byte("<!doctype html><title>rebound</title>")})
		}
	})
	if err := do(ctx, chromedp.Navigate(rebound+"/attack")); err != nil {
		t.Fatalf("open %s/attack: %v", rebound, err)
	}
	got := awaitJS[string](t, ctx, `fetch("/v1/locks/rebound/acquire", {method: "POST",
		headers: {"Content-Type": "application/json"}, body: '{"ttl_ms":60000,"wait_ms":0}'}).then(async r => r.status + " " + await r.text())`)
	if strings.HasPrefix(got, "200") || c.held(t)["rebound"] != 0 {
		t.Errorf("a page at %s acquired on the loopback server: %s", rebound, got)
	}
	reqs := c.rec.from(rebound)
	if len(reqs) == 0 {
		t.Errorf("the server received no request from %s (the test would be blind)", rebound)
	}
	for _, r := range reqs { // a browser tries a 421 once more, on a new connection
		if r.Status < 400 {
			t.Errorf("the loopback server answered %d to %s %s from %s", r.Status, r.Method, r.Path, rebound)
		}
	}
}

// checkOwnRequests: the signed-in dashboard itself force-releases from
// its page (its button, confirmed), then signs out.
func checkOwnRequests(t *testing.T, ctx context.Context, a *dlockServer, victim lease) {
	t.Helper()
	if err := do(ctx, chromedp.Navigate(a.base+"/")); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the stream is live", `document.getElementById("status").textContent === "live"`)
	if err := do(ctx, clickRow(`tr[data-name="victim"] button.force`),
		chromedp.WaitVisible(chromedp.CSS(`dialog#confirm[open]`)),
		chromedp.Click(chromedp.CSS(`dialog#confirm button.confirm`))); err != nil {
		t.Fatalf("force-release victim from the page: %v\n%s", err, pageState(ctx))
	}
	waitVisible(t, ctx, `#notice`)
	if got := text(t, ctx, `#notice`); !strings.Contains(got, fmt.Sprintf("fence %d;", victim.Fence)) {
		t.Errorf("force-release from the dashboard's own page says %q, want fence %d evicted", got, victim.Fence)
	}
	if held := a.held(t); held["victim"] != 0 {
		t.Errorf("after the page's force-release victim is still held at fence %d", held["victim"])
	}
	waitVisible(t, ctx, `#events li[data-type="force-released"][data-name="victim"]`)
	if err := do(ctx, chromedp.Click(chromedp.CSS(`form.logout button`))); err != nil {
		t.Fatalf("sign out: %v", err)
	}
	waitVisible(t, ctx, `input[name="token"]`)
}

// awaitJS evaluates expr, a promise, and returns what it resolves to.
func awaitJS[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, waitUI)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}
