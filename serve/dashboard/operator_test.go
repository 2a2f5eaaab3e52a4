package dashboard_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	_ "github.com/dlockdev/dlock/redislock"
)

// longName is a lock name too long for a timeline card's width.
const longName = "a-rather-long-lock-name-for-the-nightly-billing-export-job"

// TestDashboardForOperators drives the page, signed in as an admin, over
// a real Redis server (whose fences are 16 digits) beside another
// process's Locker on the same Redis (the library, or the CLI, not this
// server), and checks what an operator reads: names on one line, fences
// inside their cards, an honest waiters panel, a force-release made
// elsewhere shown as one, what the backend knows of holders granted
// elsewhere, and a force-release from the page.
func TestDashboardForOperators(t *testing.T) {
	chromium := chromiumPath(t)
	url := testserver.Redis(t).URL()
	api := startServerOn(t, url)
	elsewhere, err := dlock.Open(context.Background(), url)
	if err != nil {
		t.Fatalf("open a second Locker on %s: %v", url, err)
	}
	t.Cleanup(func() { _ = elsewhere.Close() })
	ctx := startBrowser(t, chromium)
	dialogs := watchDialogs(ctx)
	signInWith(t, ctx, api.base, adminToken)
	waitJS(t, ctx, "the stream is live", `document.getElementById("status").textContent === "live"`)

	first := api.acquire(t, longName, "cron@db1")
	api.release(t, first.LeaseID)
	api.acquire(t, longName, "cron@db2")
	x := api.acquire(t, "x", "cron@db3")
	if digits := len(fmt.Sprint(x.Fence)); digits < 16 {
		t.Fatalf("Redis gave fence %d (%d digits): the test needs a 16-digit fence", x.Fence, digits)
	}
	waitVisible(t, ctx, `#timeline figure[data-name="x"]`)
	waitJS(t, ctx, "two grants on the long name's timeline", fmt.Sprintf(
		`document.querySelectorAll('#timeline figure[data-name=%q] circle').length === 2`, longName))
	// The holders table follows its own snapshots: wait for both rows.
	waitJS(t, ctx, "the long name and x in the holders table", fmt.Sprintf(
		`!!document.querySelector('#holders tbody tr[data-name=%q]') && !!document.querySelector('#holders tbody tr[data-name="x"]')`, longName))

	t.Run("NamesOnOneLine", func(t *testing.T) { checkNamesOnOneLine(t, ctx) })
	t.Run("FencesInsideCards", func(t *testing.T) {
		checkInsideCards(t, ctx, "1280 px wide")
		if err := do(ctx, chromedp.EmulateViewport(420, 900)); err != nil {
			t.Fatalf("narrow the window: %v", err)
		}
		defer func() { _ = do(ctx, chromedp.EmulateViewport(1280, 900)) }()
		checkInsideCards(t, ctx, "420 px wide")
	})
	t.Run("WaitersLabelledHonestly", func(t *testing.T) { checkWaitersLabel(t, ctx, api, elsewhere) })
	t.Run("ForceReleasedElsewhere", func(t *testing.T) { checkForceReleasedElsewhere(t, ctx, api, elsewhere) })
	t.Run("HolderGrantedElsewhere", func(t *testing.T) { checkGrantedElsewhere(t, ctx, elsewhere) })
	saveScreenshot(t, ctx, "dashboard-operators.png")
	t.Run("ForceReleaseFromPage", func(t *testing.T) { checkForceReleaseFromPage(t, ctx, api, x) })

	if n := len(dialogs()); n > 0 {
		t.Errorf("the page opened %d JavaScript dialogs: %q", n, dialogs())
	}
	checkCSP(t, ctx)
}

// captionName is what the page shows of a timeline card's name.
type captionName struct {
	Name, Title, Overflow string
	Height, Line          float64
	Clipped               bool
}

// checkNamesOnOneLine: every timeline card's name is one line, the long
// one cut with an ellipsis, with the full name in its title; so is every
// name in the holders table (the long one fits whole at this width).
func checkNamesOnOneLine(t *testing.T, ctx context.Context) {
	for _, c := range []struct{ where, card, name string }{
		{"timeline", "#timeline figure.tl", "figcaption .name"},
		{"holders", "#holders tbody tr", "td.name > span"},
	} {
		got := evalJS[[]captionName](t, ctx, fmt.Sprintf(`[...document.querySelectorAll(%q)].map(f => {
			const n = f.querySelector(%q), st = getComputedStyle(n);
			return {Name: f.dataset.name, Title: n.getAttribute("title") || "", Overflow: st.textOverflow,
				Height: n.getBoundingClientRect().height, Line: parseFloat(st.lineHeight),
				Clipped: n.scrollWidth > n.clientWidth};
		})`, c.card, c.name))
		if len(got) < 2 {
			t.Fatalf("%s: %d names, want the long name and x", c.where, len(got))
		}
		for _, n := range got {
			checkOneLine(t, c.where, n, c.where == "timeline")
		}
	}
}

// checkOneLine: n is one line and titled with its whole name; the long
// name is cut with an ellipsis if cut is set, and x never is.
func checkOneLine(t *testing.T, where string, n captionName, cut bool) {
	t.Helper()
	if n.Height > 1.5*n.Line {
		t.Errorf("%s: name %q is %.0f px high, %.1f lines of %.1f px: want one line", where, n.Name, n.Height, n.Height/n.Line, n.Line)
	}
	if n.Title != n.Name {
		t.Errorf("%s: name %q has title %q, want the full name", where, n.Name, n.Title)
	}
	if n.Name == longName && cut && (!n.Clipped || n.Overflow != "ellipsis") {
		t.Errorf("%s: the long name: clipped %v, text-overflow %q; want it cut with an ellipsis", where, n.Clipped, n.Overflow)
	}
	if n.Clipped && n.Overflow != "ellipsis" {
		t.Errorf("%s: name %q is cut without an ellipsis", where, n.Name)
	}
	if n.Name == "x" && n.Clipped {
		t.Errorf("%s: the name x is clipped", where)
	}
}

// checkInsideCards: nothing in a timeline card (its caption, the plot,
// the 16-digit fence label) reaches past the card's edges, nothing in a
// caption overflows it unless cut with an ellipsis, and no card or
// panel is wider than the page's content.
func checkInsideCards(t *testing.T, ctx context.Context, width string) {
	spills := evalJS[[]string](t, ctx, `(() => {
		const out = [], main = document.querySelector("main").getBoundingClientRect();
		const label = (e) => e.tagName.toLowerCase() + (e.getAttribute("class") ? "." + e.getAttribute("class").split(" ").join(".") : "") + " " + JSON.stringify((e.textContent || "").slice(0, 60));
		for (const f of document.querySelectorAll("#timeline figure.tl")) {
			const card = f.getBoundingClientRect();
			for (const e of f.querySelectorAll("*")) {
				const r = e.getBoundingClientRect();
				if (r.width > 0 && (r.right > card.right + 0.5 || r.left < card.left - 0.5)) {
					out.push(f.dataset.name + ": " + label(e) + " spans x " + r.left.toFixed(1) + ".." + r.right.toFixed(1) + ", its card " + card.left.toFixed(1) + ".." + card.right.toFixed(1));
				}
			}
			for (const e of [f.querySelector("figcaption"), ...f.querySelectorAll("figcaption *")]) {
				if (e.scrollWidth > e.clientWidth + 1 && getComputedStyle(e).textOverflow !== "ellipsis") {
					out.push(f.dataset.name + ": " + label(e) + " scrollWidth " + e.scrollWidth + " > clientWidth " + e.clientWidth);
				}
			}
		}
		for (const p of document.querySelectorAll("main > .panel, #timeline figure.tl")) {
			const r = p.getBoundingClientRect();
			if (r.right > main.right + 0.5 || p.scrollWidth > p.clientWidth + 1) {
				out.push(label(p).slice(0, 40) + ": right " + r.right.toFixed(1) + " (main " + main.right.toFixed(1) + "), scrollWidth " + p.scrollWidth + ", clientWidth " + p.clientWidth);
			}
		}
		return out;
	})()`)
	for _, s := range spills {
		t.Errorf("%s: %s", width, s)
	}
	labels := evalJS[[]string](t, ctx, `[...document.querySelectorAll("#timeline figure.tl text.label")].map(n => n.textContent)`)
	if !slicesHasLong(labels, 16) {
		t.Errorf("%s: fence labels %q: none of 16 digits (the check would be blind)", width, labels)
	}
}

func slicesHasLong(ss []string, n int) bool {
	for _, s := range ss {
		if len(s) >= n {
			return true
		}
	}
	return false
}

// checkWaitersLabel: while a process waits on the same backend through
// the library (as `dlock run --wait` does), the waiters panel does not
// claim that nobody waits: it says whose waits it lists.
func checkWaitersLabel(t *testing.T, ctx context.Context, api *apiClient, elsewhere *dlock.Locker) {
	held := api.acquire(t, "report", "test/report")
	waiting := make(chan error, 1)
	wctx, cancel := context.WithCancel(context.Background())
	go func() {
		ls, err := elsewhere.Acquire(wctx, "report", dlock.WithOwner("cli/wait"), dlock.WithWait(dlock.Forever))
		if err == nil {
			err = ls.Release(context.Background())
		}
		waiting <- err
	}()
	defer func() {
		cancel()
		api.release(t, held.LeaseID)
		<-waiting
	}()
	waitVisible(t, ctx, `tr[data-name="report"]`)
	panel := text(t, ctx, `section[aria-labelledby="h-waiters"]`)
	if strings.Contains(panel, "Nobody is waiting.") || !strings.Contains(panel, "through this server") {
		t.Errorf("with a process waiting for report through the library, the waiters panel says %q: want it to say it lists waits through this server", panel)
	}
}

// checkForceReleasedElsewhere: a lease of this server force-released by
// another process (dlock release --force) shows as force-released, not
// as a bare loss.
func checkForceReleasedElsewhere(t *testing.T, ctx context.Context, api *apiClient, elsewhere *dlock.Locker) {
	victim := api.acquire(t, "victim", "py/1")
	waitVisible(t, ctx, `tr[data-name="victim"]`)
	if _, ok, _, err := elsewhere.ForceRelease(context.Background(), "victim"); err != nil || !ok {
		t.Fatalf("force-release victim from the other Locker: evicted %v, %v", ok, err)
	}
	sel := `#events li[data-type="force-released"][data-name="victim"]`
	waitVisible(t, ctx, sel)
	if got := text(t, ctx, sel); !strings.Contains(got, fmt.Sprint(victim.Fence)) || !strings.Contains(got, "outside this server") {
		t.Errorf("the force-released event says %q, want fence %d and that it came from outside this server", got, victim.Fence)
	}
	if n := evalJS[int](t, ctx, `document.querySelectorAll('#events li[data-type="lost"][data-name="victim"]').length`); n != 0 {
		t.Errorf("the force-release also shows as %d lost events", n)
	}
}

// checkGrantedElsewhere: a holder this server did not grant shows what
// the backend knows of it, not a blank age.
func checkGrantedElsewhere(t *testing.T, ctx context.Context, elsewhere *dlock.Locker) {
	ls, err := elsewhere.Acquire(context.Background(), "held-elsewhere", dlock.WithOwner("cli/99"), dlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatalf("acquire on the other Locker: %v", err)
	}
	defer func() { _ = ls.Release(context.Background()) }()
	row := `tr[data-name="held-elsewhere"]`
	waitVisible(t, ctx, row)
	age := text(t, ctx, row+` td.age`)
	title := evalJS[string](t, ctx, `document.querySelector('tr[data-name="held-elsewhere"] td.age').title`)
	if age == "—" || age == "" || !strings.Contains(title, "cli/99") || !strings.Contains(title, fmt.Sprint(ls.Fence())) || !strings.Contains(title, "left") {
		t.Errorf("the age cell of a holder granted elsewhere says %q (title %q): want what the backend knows (owner cli/99, fence %d, time left)", age, title, ls.Fence())
	}
}

// checkForceReleaseFromPage: an admin force-releases x from its row,
// through the page's confirmation (cancelled, cancelled and asked again
// at once, then confirmed); the row goes, the page says what was
// evicted, once.
func checkForceReleaseFromPage(t *testing.T, ctx context.Context, api *apiClient, x lease) {
	button := `tr[data-name="x"] button.force`
	waitVisible(t, ctx, button)
	if err := do(ctx, clickRow(button)); err != nil {
		t.Fatalf("click force-release: %v", err)
	}
	waitVisible(t, ctx, `dialog#confirm[open]`)
	if got := text(t, ctx, `dialog#confirm .what`); !strings.Contains(got, "x") || !strings.Contains(got, fmt.Sprint(x.Fence)) {
		t.Errorf("the confirmation says %q, want the name x and fence %d", got, x.Fence)
	}
	if err := do(ctx, chromedp.Click(chromedp.CSS(`dialog#confirm button.cancel`))); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	waitNotPresent(t, ctx, `dialog#confirm[open]`)
	if held := heldNames(t, api.locker); held["x"] != x.Fence {
		t.Fatalf("after cancel the backend holds %v, want x at fence %d", held, x.Fence)
	}
	if err := do(ctx, clickRow(button), chromedp.WaitVisible(chromedp.CSS(`dialog#confirm[open]`))); err != nil {
		t.Fatalf("ask again: %v", err)
	}
	// An operator who cancels and at once asks again: the dialog's close
	// event, a frame later, comes after the second question opened.
	if open := awaitJS[bool](t, ctx, `new Promise((done) => {
		const d = document.getElementById("confirm");
		d.addEventListener("close", () => setTimeout(() => done(d.open), 0), { once: true });
		d.querySelector("button.cancel").click();
		document.querySelector('tr[data-name="x"] button.force').click();
	})`); !open {
		t.Fatal("cancel and ask again at once: the dialog is not open")
	}
	if err := do(ctx, chromedp.Click(chromedp.CSS(`dialog#confirm button.confirm`))); err != nil {
		t.Fatalf("confirm force-release: %v", err)
	}
	waitVisible(t, ctx, `#notice`)
	if got := text(t, ctx, `#notice`); !strings.Contains(got, "force-released") || !strings.Contains(got, fmt.Sprint(x.Fence)) {
		t.Errorf("after the force-release the page says %q, want force-released and fence %d", got, x.Fence)
	}
	waitNotPresent(t, ctx, `tr[data-name="x"]`)
	if held := heldNames(t, api.locker); held["x"] != 0 {
		t.Errorf("after the page's force-release the backend still holds x at fence %d", held["x"])
	}
	waitVisible(t, ctx, `#events li[data-type="force-released"][data-name="x"]`)
	counts := evalJS[map[string]int](t, ctx, `({
		forced: document.querySelectorAll('#events li[data-type="force-released"][data-name="x"]').length,
		lost: document.querySelectorAll('#events li[data-type="lost"][data-name="x"]').length})`)
	if counts["forced"] != 1 || counts["lost"] != 0 {
		t.Errorf("events of x after one force-release: %v, want one force-released and no lost", counts)
	}
}

// heldNames is every name held on l's backend, with its fence.
func heldNames(t *testing.T, l *dlock.Locker) map[string]uint64 {
	t.Helper()
	hs, err := l.List(context.Background(), "")
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	out := map[string]uint64{}
	for _, h := range hs {
		out[h.Name] = h.Fence
	}
	return out
}
