package cli

import (
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dlockdev/dlock/internal/testing/testserver"
	"github.com/dlockdev/dlock/serve"
	"github.com/dlockdev/dlock/serve/dashboard"
)

var signInLine = regexp.MustCompile(`sign in to the dashboard .*: (http://\S+/signin\?t=\S+)\n`)

// TestServePrintsSignInLink: dlock serve --signin-link always prints a
// link that, opened once, signs a browser in (a dlock_session cookie and
// a redirect to the dashboard), and a second time does not; by default,
// with standard error not a terminal (a log), it prints none.
func TestServePrintsSignInLink(t *testing.T) {
	const admin = "serve-signin-admin-token-0123456789"
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, mode := range []string{"always", "auto"} {
		addr := fmt.Sprintf("127.0.0.1:%d", testserver.FreePort(t))
		var out, errb syncBuffer
		cmd := startDlock(t, []string{"DLOCK_URL=" + fileURL(t), "DLOCK_SERVE_ADMIN_TOKEN=" + admin}, &out, &errb,
			"serve", "--listen", addr, "--signin-link", mode)
		deadline := time.Now().Add(20 * time.Second)
		for !strings.Contains(errb.String(), "dashboard at /") && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		m := signInLine.FindStringSubmatch(errb.String())
		switch {
		case mode == "auto" && m != nil:
			t.Errorf("--signin-link auto with stderr a pipe printed a link: %q", errb.String())
		case mode == "always" && m == nil:
			t.Errorf("--signin-link always printed no link: %q", errb.String())
		case mode == "always":
			if !strings.HasPrefix(m[1], "http://"+addr+"/signin?t=") {
				t.Errorf("link %q, want it on http://%s", m[1], addr)
			}
			for i, want := range []int{http.StatusSeeOther, http.StatusUnauthorized} {
				resp, err := noRedirect.Get(m[1])
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				got := false
				for _, c := range resp.Cookies() {
					got = got || (c.Name == "dlock_session" && c.Value != "")
				}
				if resp.StatusCode != want || got != (i == 0) {
					t.Errorf("open the link (time %d): %d, session cookie %v; want %d", i+1, resp.StatusCode, got, want)
				}
			}
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		if strings.Contains(errb.String(), admin) {
			t.Errorf("the admin token appeared on stderr")
		}
	}
}

// TestServeSignInLinkChecked: a --signin-link value that is not one of
// the three, or always on a server without tokens, is a usage error.
func TestServeSignInLinkChecked(t *testing.T) {
	env := []string{"DLOCK_URL=" + fileURL(t)}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--insecure-no-auth", "--signin-link", "sometimes"}, `"sometimes"`},
		{[]string{"serve", "--insecure-no-auth", "--listen", "127.0.0.1:0", "--signin-link", "always"}, "no token"},
	} {
		r := runBin(t, env, c.args...)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("dlock %s: exit %d %q, want 2 naming %s", strings.Join(c.args, " "), r.code, r.stderr, c.want)
		}
	}
}

// TestSignInLinkOnTerminal: on a terminal (auto), the link names the
// listener, or this machine for a wildcard address; never prints none.
func TestSignInLinkOnTerminal(t *testing.T) {
	l := openMem(t, memURL(t))
	srv, err := serve.New(serve.Config{Locker: l, AdminTokens: []string{"terminal-admin-token-0123456789"}, Dashboard: dashboard.Handler()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for _, c := range []struct {
		mode string
		addr net.Addr
		want string
	}{
		{signInAuto, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7070}, "http://127.0.0.1:7070/signin?t="},
		{signInAuto, &net.TCPAddr{IP: net.IPv6loopback, Port: 7070}, "http://[::1]:7070/signin?t="},
		{signInAuto, &net.TCPAddr{IP: net.IPv4zero, Port: 7070}, ":7070/signin?t="},
		{signInNever, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7070}, ""},
	} {
		var b strings.Builder
		printSignInLink(&b, &serveOptions{signInLink: c.mode}, true, srv, "http", c.addr)
		if (c.want == "") != (b.Len() == 0) || !strings.Contains(b.String(), c.want) || strings.Contains(b.String(), "0.0.0.0") {
			t.Errorf("--signin-link %s on %s: %q, want %q", c.mode, c.addr, b.String(), c.want)
		}
	}
}
