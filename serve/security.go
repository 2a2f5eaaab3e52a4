package serve

import (
	"crypto/sha256"
	"encoding/base64"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// Browser-facing defences. A browser adds credentials to requests a page
// of any origin makes: the session cookie (SameSite=Strict is per site,
// and another port of the same host is the same site), a TLS client
// certificate, or, with --insecure-no-auth, nothing is needed at all. So:
//
//   - every POST and DELETE from another origin is refused (403): the
//     browser's Sec-Fetch-Site, or its Origin against Host
//     (http.CrossOriginProtection); requests from programs carry
//     neither and pass;
//   - a JSON endpoint refuses a body of another media type (415), and a
//     request it cannot tell from a browser's (no bearer token) must say
//     application/json even without a body: a page can send that only
//     after a CORS preflight, which this server never grants;
//   - a server on loopback only refuses a Host that is not a loopback
//     name (421): a page whose own name was made to resolve to 127.0.0.1
//     (DNS rebinding) would otherwise be same-origin with the API;
//   - every answer forbids framing and cross-origin embedding, and the
//     pages carry a Content-Security-Policy.
var crossOrigin = http.NewCrossOriginProtection()

// apiCSP is the policy of every answer but the pages: nothing may load
// from it, nothing may frame it.
const apiCSP = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"

// securityValues are the headers every answer carries, keys in canonical
// form. Every answer shares the value slices, made once: nothing writes
// into them (Header.Set replaces a value, and Header.Add appends to a
// slice of length and capacity 1, which copies it).
var securityValues = []struct {
	key   string
	value []string
}{
	{"X-Content-Type-Options", []string{"nosniff"}},
	{"X-Frame-Options", []string{"DENY"}},
	{"Content-Security-Policy", []string{apiCSP}},
	{"Cross-Origin-Resource-Policy", []string{"same-origin"}},
	{"Cross-Origin-Opener-Policy", []string{"same-origin"}},
	{"Referrer-Policy", []string{"no-referrer"}},
}

// securityHeaders sets the headers every answer carries.
func securityHeaders(h http.Header) {
	for _, kv := range securityValues {
		h[kv.key] = kv.value
	}
}

// screen refuses what must not reach a handler: a Host that is not
// loopback on a loopback-only server, a state-changing request from
// another origin. false means it answered.
func (s *Server) screen(w http.ResponseWriter, r *http.Request) bool {
	if s.cfg.LoopbackOnly && !loopbackHost(r.Host) {
		refuse(w)
		writeProblem(w, http.StatusMisdirectedRequest, "misdirected", "Host refused",
			"this server listens on loopback only and answers only to a loopback Host (localhost, 127.0.0.1, [::1]), not "+quoteTrunc(r.Host))
		return false
	}
	if err := crossOrigin.Check(r); err != nil {
		refuse(w)
		writeProblem(w, http.StatusForbidden, "cross-origin", "Cross-origin request refused",
			"a "+r.Method+" from a page of another origin is refused: the API takes no cross-origin browser requests")
		return false
	}
	return true
}

// loopbackHost reports whether a Host header names this machine's
// loopback: localhost, a *.localhost name (browsers resolve those to
// loopback themselves), or a loopback address.
func loopbackHost(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsLoopback()
}

// jsonIn wraps a JSON endpoint's handler (inside the authentication
// guard): a Content-Type other than application/json is refused, and so
// is none at all unless a bearer token authenticated the request.
func jsonIn(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ct := r.Header.Get("Content-Type")
		switch {
		case ct == "application/json": // as every client sends it: no need to parse
		case ct == "" && bearer(r) != "":
		case ct != "" && isJSON(ct):
		default:
			refuse(w)
			w.Header().Set("Accept-Post", "application/json")
			writeProblem(w, http.StatusUnsupportedMediaType, "unsupported-media-type", "Send JSON",
				"this endpoint takes Content-Type: application/json (got "+quoteTrunc(ct)+"); without a bearer token it is required even with no body")
			return
		}
		h(w, r)
	}
}

// isJSON reports whether the media type ct is application/json, with any
// parameters.
func isJSON(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/json"
}

// loginStyle is the sign-in page's only style, allowed by its hash.
const loginStyle = `body{font:15px system-ui,sans-serif;margin:4em auto;max-width:24em}input{font:inherit;padding:.4em;width:100%;box-sizing:border-box;margin:.4em 0}`

// loginCSP is the sign-in page's policy: its own style, a form posting
// to this server, nothing else.
var loginCSP = func() string {
	sum := sha256.Sum256([]byte(loginStyle))
	return "default-src 'none'; style-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) +
		"'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
}()
