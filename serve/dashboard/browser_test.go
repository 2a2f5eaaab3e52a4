package dashboard_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	_ "github.com/dlockdev/dlock/memlock"
	"github.com/dlockdev/dlock/serve"
	"github.com/dlockdev/dlock/serve/dashboard"
)

const (
	clientToken = "client-token-for-the-dashboard-test"
	adminToken  = "admin-token-for-the-dashboard-test"
	// xssName is a valid lock name (printable, no control characters) that
	// runs script if the page ever parses a name as markup.
	xssName = `<img src=x onerror=alert(1)>`
	// waitUI bounds each wait for the page: the stream pushes a change
	// within ~100 ms and a snapshot every 2 s.
	waitUI = 10 * time.Second
)

// TestDashboardInBrowser drives the real page in Chromium against the real
// server on the memory backend: it signs in with the form, then takes,
// releases and force-releases locks through the HTTP API and watches the
// page follow over the live stream.
func TestDashboardInBrowser(t *testing.T) {
	chromium := chromiumPath(t)
	api := startServer(t)
	ctx := startBrowser(t, chromium)

	dialogs := watchDialogs(ctx)
	watchCSP(t, ctx)
	if err := do(ctx, chromedp.Navigate(api.base+"/")); err != nil {
		t.Fatalf("open %s: %v", api.base, err)
	}
	waitVisible(t, ctx, `input[name="token"]`)
	if v := cspViolations(t, ctx); len(v) > 0 {
		t.Errorf("the sign-in page broke its Content-Security-Policy: %q", v)
	}
	signIn(t, ctx, api.base)
	waitJS(t, ctx, "the stream is live", `document.getElementById("status").textContent === "live"`)

	// A lock taken through the API shows as a row with its owner and fence.
	report := api.acquire(t, "report", "test/report")
	waitVisible(t, ctx, `tr[data-name="report"]`)
	if got := text(t, ctx, `tr[data-name="report"] td.fence`); got != fmt.Sprint(report.Fence) {
		t.Errorf("report's fence cell = %q, want %d", got, report.Fence)
	}
	if got := text(t, ctx, `tr[data-name="report"] td.owner`); got != "test/report" {
		t.Errorf("report's owner cell = %q, want test/report", got)
	}
	if got := text(t, ctx, `tr[data-name="report"] td.ttl`); !strings.HasSuffix(got, " s") && !strings.HasSuffix(got, "s") {
		t.Errorf("report's TTL cell = %q, want a countdown in seconds", got)
	}
	waitVisible(t, ctx, `#events li[data-type="granted"][data-name="report"]`)
	if n := evalJS[int](t, ctx, `document.querySelectorAll("#holders button.force").length`); n != 0 {
		t.Errorf("a client (not an admin) sees %d force-release buttons", n)
	}
	waitVisible(t, ctx, `#timeline figure[data-name="report"] circle`)

	// A waiter queued behind a holder shows under the name.
	deploy := api.acquire(t, "deploy", "ci/1")
	waiter := api.acquireAsync(t, "deploy", "ci/2")
	waitVisible(t, ctx, `#waiters [data-name="deploy"] li[data-owner="ci/2"]`)

	// Released: the row goes, a released event comes.
	api.release(t, report.LeaseID)
	waitNotPresent(t, ctx, `tr[data-name="report"]`)
	waitVisible(t, ctx, `#events li[data-type="released"][data-name="report"]`)

	// The waiter gets the lock when its holder lets go.
	api.release(t, deploy.LeaseID)
	if l := <-waiter; l.Owner != "ci/2" {
		t.Errorf("the waiter's lease has owner %q, want ci/2", l.Owner)
	}
	waitVisible(t, ctx, `tr[data-name="deploy"][data-owner="ci/2"]`)
	waitNotPresent(t, ctx, `#waiters [data-name="deploy"]`)

	// An admin evicts a holder: a highlighted force-released event.
	api.acquire(t, "nightly", "cron/7")
	waitVisible(t, ctx, `tr[data-name="nightly"]`)
	api.forceRelease(t, "nightly")
	waitVisible(t, ctx, `#events li.ev-force-released[data-type="force-released"][data-name="nightly"]`)
	waitNotPresent(t, ctx, `tr[data-name="nightly"]`)

	// Semaphore permits show as one row each, with the permit number.
	api.acquirePermit(t, "pool", "worker/1", 3)
	api.acquirePermit(t, "pool", "worker/2", 3)
	waitJS(t, ctx, "two permit rows for pool", `document.querySelectorAll('tr[data-name="pool"][data-kind="permit"]').length === 2`)
	if got := text(t, ctx, `tr[data-name="pool"] .kind`); !strings.HasPrefix(got, "permit ") || !strings.HasSuffix(got, "/3") {
		t.Errorf("pool's kind cell = %q, want permit K/3", got)
	}

	// A lease this server did not grant (taken on the Locker directly, as
	// another process would) shows too, with what the backend knows
	// instead of an age.
	direct, err := api.locker.Acquire(context.Background(), "direct", dlock.WithOwner("cron/direct"), dlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatalf("acquire direct on the locker: %v", err)
	}
	defer func() { _ = direct.Release(context.Background()) }()
	waitVisible(t, ctx, `tr[data-name="direct"][data-owner="cron/direct"]`)
	if got := text(t, ctx, `tr[data-name="direct"] td.age`); got != "elsewhere" {
		t.Errorf("age of a lease another process holds = %q, want elsewhere", got)
	}

	checkEscapes(t, ctx, api)

	if n := len(dialogs()); n > 0 {
		t.Errorf("the page opened %d JavaScript dialogs: %q", n, dialogs())
	}
	if got := text(t, ctx, "#status"); got != "live" {
		t.Errorf("#status = %q at the end, want live", got)
	}
	checkCSP(t, ctx)
	saveScreenshot(t, ctx, "dashboard.png")

	checkPolling(t, ctx, api)
}

// checkPolling opens a second tab that cannot reach the stream (the
// browser blocks its URL): the page must fall back to polling
// GET /v1/dashboard and still follow the server.
func checkPolling(t *testing.T, browser context.Context, api *apiClient) {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser)
	defer cancel()
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatalf("network.enable: %v", err)
	}
	block := []*network.BlockPattern{{URLPattern: "*://*:*/v1/dashboard/stream", Block: true}}
	if _, err := chromedp.Call(ctx, network.SetBlockedURLs, network.SetBlockedURLsParams{URLPatterns: block}); err != nil {
		t.Fatalf("block the stream: %v", err)
	}
	if err := do(ctx, chromedp.Navigate(api.base+"/")); err != nil {
		t.Fatalf("open the dashboard in a second tab: %v", err)
	}
	waitJS(t, ctx, "the page to poll", `document.getElementById("status").textContent === "polling"`)
	api.acquire(t, "polled", "poller/1")
	waitVisible(t, ctx, `tr[data-name="polled"]`)
}

// checkEscapes takes a lock whose name is markup and checks that the page
// shows it as text everywhere and runs none of it.
func checkEscapes(t *testing.T, ctx context.Context, api *apiClient) {
	t.Helper()
	api.acquire(t, xssName, `<b>owner</b>`)
	name, _ := json.Marshal(xssName)
	waitJS(t, ctx, "the row of the markup-named lock", fmt.Sprintf(
		`[...document.querySelectorAll("#holders tr")].some(tr => tr.dataset.name === %s)`, name))
	got := evalJS[[]string](t, ctx, fmt.Sprintf(`(() => {
		const tr = [...document.querySelectorAll("#holders tr")].find(tr => tr.dataset.name === %s);
		return [tr.querySelector("td.name").textContent, tr.querySelector("td.owner").textContent];
	})()`, name))
	if len(got) != 2 || got[0] != xssName || got[1] != "<b>owner</b>" {
		t.Errorf("name and owner cells = %q, want %q and %q as text", got, xssName, "<b>owner</b>")
	}
	waitJS(t, ctx, "the markup-named lock's event and timeline", fmt.Sprintf(
		`[...document.querySelectorAll("#events li, #timeline figure")].filter(n => n.dataset.name === %s).length >= 2`, name))
	if n := evalJS[int](t, ctx, `document.querySelectorAll('img[src="x"], [onerror], #holders b, #events b').length`); n != 0 {
		t.Errorf("the page made %d elements out of a lock name or owner", n)
	}
}

// chromiumPath finds Debian's chromium, or skips (fails in CI).
func chromiumPath(t *testing.T) string {
	return testserver.Binary(t, "chromium", "/usr/bin")
}

// startBrowser starts headless Chromium with the flags an offline machine
// needs (without them it stalls on network calls), in a fresh profile.
func startBrowser(t *testing.T, chromium string) context.Context {
	var out bytes.Buffer
	var mu sync.Mutex
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromium),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("hide-scrollbars", true),
		// rebind.test stands for a name an attacker made resolve to
		// 127.0.0.1 (DNS rebinding).
		chromedp.Flag("host-resolver-rules", "MAP rebind.test 127.0.0.1"),
		// Chromium asks the user before a page it did not load from a
		// local address reaches one (Local Network Access), and headless
		// it refuses: off, so that the tests see the server's own
		// defences, which other browsers rely on.
		chromedp.Flag("disable-features", "LocalNetworkAccessChecks"),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
		chromedp.CombinedOutput(lockedWriter{&mu, &out}),
	)
	ctx, cancel := chromedp.NewContext(alloc, chromedp.WithLogf(t.Logf))
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
		if t.Failed() {
			mu.Lock()
			t.Logf("chromium output (D-Bus noise left out):\n%s", browserLog(out.String()))
			mu.Unlock()
		}
	})
	// The first Run starts the browser; it must have no deadline.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium %s: %v", chromium, err)
	}
	return ctx
}

// browserLog is the tail of Chromium's output without the D-Bus errors a
// machine with no session bus prints on every start.
func browserLog(s string) string {
	var keep []string
	for line := range strings.Lines(s) {
		if !strings.Contains(line, "dbus") {
			keep = append(keep, line)
		}
	}
	return strings.Join(keep[max(0, len(keep)-40):], "")
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}

// watchDialogs records (and dismisses) every alert, confirm or prompt:
// the page must never open one.
func watchDialogs(ctx context.Context) func() []string {
	var mu sync.Mutex
	var seen []string
	events := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for ev, err := range events {
			if err != nil {
				return
			}
			mu.Lock()
			seen = append(seen, ev.Message)
			mu.Unlock()
			_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{})
		}
	}()
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
}

// watchCSP records, in every page the tab opens, the violations of its
// Content-Security-Policy (window.__csp).
func watchCSP(t *testing.T, ctx context.Context) {
	t.Helper()
	src := `window.__csp = []; document.addEventListener("securitypolicyviolation", (e) => window.__csp.push(e.violatedDirective + " " + e.blockedURI));`
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: src}); err != nil {
		t.Fatalf("watch CSP violations: %v", err)
	}
}

func cspViolations(t *testing.T, ctx context.Context) []string {
	t.Helper()
	return evalJS[[]string](t, ctx, `window.__csp || []`)
}

// checkCSP: the dashboard ran without breaking its policy, and the policy
// is in force: a script injected inline does not run.
func checkCSP(t *testing.T, ctx context.Context) {
	t.Helper()
	if v := cspViolations(t, ctx); len(v) > 0 {
		t.Errorf("the dashboard broke its Content-Security-Policy: %q", v)
	}
	ran := evalJS[bool](t, ctx, `(() => {
		const s = document.createElement("script");
		s.textContent = "window.__inline = true";
		document.head.append(s);
		return window.__inline === true;
	})()`)
	if ran {
		t.Error("an inline script ran in the dashboard: no Content-Security-Policy in force")
	}
}

// signIn opens the dashboard unauthenticated, gets the login form, and
// submits the client token.
func signIn(t *testing.T, ctx context.Context, base string) {
	t.Helper()
	signInWith(t, ctx, base, clientToken)
}

// signInWith signs in through the login form with tok.
func signInWith(t *testing.T, ctx context.Context, base, tok string) {
	t.Helper()
	if err := do(ctx, chromedp.Navigate(base+"/")); err != nil {
		t.Fatalf("open %s: %v", base, err)
	}
	waitVisible(t, ctx, `input[name="token"]`)
	if err := do(ctx,
		chromedp.SendKeys(chromedp.CSS(`input[name="token"]`), tok),
		chromedp.Submit(chromedp.CSS(`input[name="token"]`)),
	); err != nil {
		t.Fatalf("submit the login form: %v", err)
	}
	waitVisible(t, ctx, `#holders`)
}

// saveScreenshot saves the page as name in $DLOCK_TEST_ARTIFACTS (or a
// folder under the temporary directory).
func saveScreenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	dir := os.Getenv("DLOCK_TEST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "dlock-artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("artifacts: %v", err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatalf("artifacts: %v", err)
	}
	t.Logf("screenshot: %s", path)
}

// --- waiting on the page ---------------------------------------------------

// do runs steps with the per-step bound; the browser's own context has none.
func do(ctx context.Context, steps ...chromedp.Action[chromedp.Void]) error {
	ctx, cancel := context.WithTimeout(ctx, waitUI)
	defer cancel()
	return chromedp.Do(ctx, steps...)
}

// clickRow clicks the element sel matches in a table the stream rebuilds
// (every snapshot replaces the rows): a click finds the node, then scrolls
// to it and presses, and a rebuild between the two leaves it clicking a
// node that is gone. It tries again on a fresh node, a few times.
func clickRow(sel string) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		var err error
		for range 5 {
			_, err = chromedp.Click(chromedp.CSS(sel))(ctx, tg)
			if err == nil || !staleNode(err) {
				return chromedp.Void{}, err
			}
		}
		return chromedp.Void{}, err
	}
}

// staleNode tells the errors of acting on a node the page has replaced.
func staleNode(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "No node with given id") || strings.Contains(msg, "Could not compute box model") || strings.Contains(msg, "Node is detached")
}

func waitVisible(t *testing.T, ctx context.Context, sel string) {
	t.Helper()
	if err := do(ctx, chromedp.WaitVisible(chromedp.CSS(sel))); err != nil {
		t.Fatalf("wait for %s to show: %v\n%s", sel, err, pageState(ctx))
	}
}

func waitNotPresent(t *testing.T, ctx context.Context, sel string) {
	t.Helper()
	if err := do(ctx, chromedp.WaitNotPresent(chromedp.CSS(sel))); err != nil {
		t.Fatalf("wait for %s to go: %v\n%s", sel, err, pageState(ctx))
	}
}

func waitJS(t *testing.T, ctx context.Context, what, cond string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, waitUI)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](cond, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(waitUI))); err != nil {
		t.Fatalf("wait for %s (%s): %v\n%s", what, cond, err, pageState(ctx))
	}
}

// text reads the text of the first element sel matches, waiting for one to
// exist. It reads in one evaluation in the page: querying a node and then
// reading it are two round trips, and the stream may re-render the table
// between them, leaving the first node's id stale.
func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	q, err := json.Marshal(sel)
	if err != nil {
		t.Fatalf("encode selector %s: %v", sel, err)
	}
	waitJS(t, ctx, sel+" to exist", fmt.Sprintf(`document.querySelector(%s) !== null`, q))
	s := evalJS[string](t, ctx, fmt.Sprintf(`(document.querySelector(%s) || {textContent: "(gone)"}).textContent`, q))
	return strings.TrimSpace(s)
}

func evalJS[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, waitUI)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// pageState is what a failed wait prints: the status, the notice, the
// confirmation dialog and the tables' text.
func pageState(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`["status", "notice", "confirm", "holders", "waiters", "events"].map(id => {
		const n = document.getElementById(id);
		return id + ": " + (n ? n.innerText.replace(/\s+/g, " ").slice(0, 600) : "(missing)");
	}).join("\n") + "\nurl: " + location.href`))
	if err != nil {
		return fmt.Sprintf("(page state unavailable: %v)", err)
	}
	return s
}

// --- the server and its HTTP API -------------------------------------------

type apiClient struct {
	base   string
	srv    *serve.Server
	locker *dlock.Locker
	wg     sync.WaitGroup
}

type lease struct {
	LeaseID string `json:"lease_id"`
	Name    string `json:"name"`
	Owner   string `json:"owner"`
	Fence   uint64 `json:"fence"`
}

func startServer(t *testing.T) *apiClient {
	t.Helper()
	return startServerOn(t, "mem://dash-test")
}

// startServerOn starts a server with the dashboard over the backend at
// url.
func startServerOn(t *testing.T, url string) *apiClient {
	t.Helper()
	locker, err := dlock.Open(context.Background(), url)
	if err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
	srv, err := serve.New(serve.Config{
		Locker:      locker,
		Tokens:      []string{clientToken},
		AdminTokens: []string{adminToken},
		Dashboard:   dashboard.Handler(),
	})
	if err != nil {
		t.Fatalf("serve.New: %v", err)
	}
	ts := httptest.NewServer(srv)
	api := &apiClient{base: ts.URL, srv: srv, locker: locker}
	t.Cleanup(func() {
		// The browser is gone by now (its cleanup ran first); Close ends
		// the SSE streams so the test server can shut down.
		if err := srv.Close(); err != nil {
			t.Errorf("serve.Server.Close: %v", err)
		}
		ts.Close()
		api.wg.Wait()
		if err := locker.Close(); err != nil {
			t.Errorf("close the locker: %v", err)
		}
	})
	return api
}

func (c *apiClient) call(t *testing.T, method, path, token string, body any, want int) []byte {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: status %d, want %d: %s", method, path, resp.StatusCode, want, out)
	}
	return out
}

func lockPath(kind, name, verb string) string {
	return "/v1/" + kind + "/" + url.PathEscape(name) + "/" + verb
}

func decodeLease(t *testing.T, body []byte) lease {
	t.Helper()
	var l lease
	if err := json.Unmarshal(body, &l); err != nil || l.LeaseID == "" {
		t.Fatalf("decode lease %s: %v", body, err)
	}
	return l
}

func (c *apiClient) acquire(t *testing.T, name, owner string) lease {
	t.Helper()
	body := map[string]any{"owner": owner, "ttl_ms": 60000, "wait_ms": 0}
	return decodeLease(t, c.call(t, http.MethodPost, lockPath("locks", name, "acquire"), clientToken, body, http.StatusOK))
}

func (c *apiClient) acquirePermit(t *testing.T, name, owner string, permits int) lease {
	t.Helper()
	body := map[string]any{"owner": owner, "ttl_ms": 60000, "wait_ms": 0, "permits": permits}
	return decodeLease(t, c.call(t, http.MethodPost, lockPath("semaphores", name, "acquire"), clientToken, body, http.StatusOK))
}

// acquireAsync waits for the lock in the background (up to 20 s); the
// lease arrives on the channel. An error fails the test from the
// goroutine with Errorf.
func (c *apiClient) acquireAsync(t *testing.T, name, owner string) <-chan lease {
	ch := make(chan lease, 1)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer close(ch)
		b, _ := json.Marshal(map[string]any{"owner": owner, "ttl_ms": 60000, "wait_ms": 20000})
		req, _ := http.NewRequest(http.MethodPost, c.base+lockPath("locks", name, "acquire"), bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+clientToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Errorf("waiting acquire of %s: %v", name, err)
			return
		}
		defer resp.Body.Close()
		var l lease
		if err := json.NewDecoder(resp.Body).Decode(&l); err != nil || resp.StatusCode != http.StatusOK {
			t.Errorf("waiting acquire of %s: status %d, %v", name, resp.StatusCode, err)
			return
		}
		ch <- l
	}()
	return ch
}

func (c *apiClient) release(t *testing.T, leaseID string) {
	t.Helper()
	c.call(t, http.MethodDelete, "/v1/leases/"+leaseID, clientToken, nil, http.StatusNoContent)
}

func (c *apiClient) forceRelease(t *testing.T, name string) {
	t.Helper()
	c.call(t, http.MethodPost, lockPath("locks", name, "force-release"), adminToken, map[string]any{}, http.StatusOK)
}
