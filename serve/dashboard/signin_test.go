package dashboard_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestSignInLinkInBrowser: a one-time sign-in link, as dlock serve
// prints it, opened in Chromium from outside any page lands on the
// dashboard, signed in. The same link clicked on a page of another site
// first is refused (the visitor is not signed in to the session the link
// starts) and stays usable.
func TestSignInLinkInBrowser(t *testing.T) {
	chromium := chromiumPath(t)
	api := startServer(t)
	ctx := startBrowser(t, chromium)
	path, err := api.srv.SignInLink()
	if err != nil {
		t.Fatal(err)
	}
	link := api.base + path
	// rebind.test resolves to 127.0.0.1 in this browser: another site.
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte(`<!doctype html><title>evil</title><a id="go" href="` + link + `">dashboard</a>`))
	}))
	defer evil.Close()
	if err := do(ctx, chromedp.Navigate(strings.Replace(evil.URL, "127.0.0.1", "rebind.test", 1))); err != nil {
		t.Fatalf("open the other site's page: %v", err)
	}
	if err := do(ctx, chromedp.Click(chromedp.CSS("#go"))); err != nil {
		t.Fatalf("click the link: %v", err)
	}
	waitVisible(t, ctx, `p[role="alert"]`)
	if got := text(t, ctx, `p[role="alert"]`); !strings.Contains(got, "not followed from a page") {
		t.Errorf("the link followed from another site's page says %q, want the refusal", got)
	}
	if err := do(ctx, chromedp.Navigate(api.base+"/")); err != nil {
		t.Fatal(err)
	}
	waitVisible(t, ctx, `input[name="token"]`) // not signed in

	if err := do(ctx, chromedp.Navigate(link)); err != nil {
		t.Fatalf("open the sign-in link: %v", err)
	}
	waitVisible(t, ctx, `#holders`)
	if loc, err := chromedp.Run(ctx, chromedp.Location()); err != nil || loc != api.base+"/" {
		t.Errorf("after the sign-in link the browser is at %q (%v), want %s/ (the code out of the address bar)", loc, err, api.base)
	}
}
