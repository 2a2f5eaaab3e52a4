package cli

import (
	"fmt"
	"io"
	"net"
	"os"

	"github.com/dlockdev/dlock/serve"
)

// --signin-link values: when dlock serve prints a one-time link that
// signs a browser in to the dashboard.
const (
	signInAuto   = "auto"   // when standard error is a terminal
	signInAlways = "always" // also into a log: anyone who reads it first signs in
	signInNever  = "never"
)

// checkSignIn checks --signin-link against the tokens the server has.
func (o *serveOptions) checkSignIn(tokens int) error {
	switch o.signInLink {
	case signInAuto, signInNever:
		return nil
	case signInAlways:
		if tokens == 0 {
			return usageErr("--signin-link always: the server has no token (--token-file, --admin-token-file) to sign in with")
		}
		return nil
	}
	return usageErr("--signin-link %q: want auto, always or never", o.signInLink)
}

// printSignInLink prints the dashboard's one-time sign-in link, if
// --signin-link asks for it, for a server of that scheme listening on
// addr. The link is the only place its code is written.
func printSignInLink(w io.Writer, o *serveOptions, tty bool, srv *serve.Server, scheme string, addr net.Addr) {
	if o.signInLink == signInNever || (o.signInLink == signInAuto && !tty) {
		return
	}
	path, err := srv.SignInLink()
	if err != nil {
		return // no tokens: nobody signs in
	}
	fmt.Fprintf(w, "dlock serve: sign in to the dashboard (one browser, once, within %s): %s://%s%s\n",
		serve.SignInTTL, scheme, linkHost(addr), path)
}

// linkHost is the host:port a browser reaches the listener at: its
// address, or this machine's name for a wildcard address.
func linkHost(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return addr.String()
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		if name, err := os.Hostname(); err == nil {
			host = name
		}
	}
	return net.JoinHostPort(host, port)
}
