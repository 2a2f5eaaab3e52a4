package serve

import (
	"crypto/subtle"
	"html/template"
	"net/http"
	"strconv"
	"time"

	"golang.org/x/time/rate"
)

// cookieName is the dashboard's cookie: a random session id set by POST
// /login (never the token itself), accepted like the Authorization
// header for sessionTTL.
const cookieName = "dlock_session"

// role is what a request may do.
type role int

const (
	roleNone role = iota
	roleClient
	roleAdmin
)

// roleOf authenticates a request: an admin or client bearer token (header
// or cookie), or a verified TLS client certificate (mTLS), which is a
// client. The comparison takes the same time whatever the token. The name
// it returns says who the client is (see clientName) and holds no secret.
func (s *Server) roleOf(r *http.Request) (role, string) {
	if c, err := r.Cookie(cookieName); err == nil && r.Header.Get("Authorization") == "" {
		if ss, ok := s.sessions.get(c.Value, time.Now()); ok {
			return ss.role, ss.who
		}
	}
	if tok := bearer(r); tok != "" {
		return s.tokenRole(tok)
	}
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
		return roleClient, "certificate " + r.TLS.VerifiedChains[0][0].Subject.String()
	}
	if s.cfg.InsecureNoAuth {
		return roleClient, "address " + s.clientAddr(r)
	}
	return roleNone, ""
}

// tokenRole is the role a token gives and the client it names: "admin
// token 2" for the second of Config.AdminTokens, "client token 1" for
// the first of Config.Tokens. The name holds nothing of the token, so it
// may be logged.
func (s *Server) tokenRole(tok string) (role, string) {
	if i := tokenAt(tok, s.cfg.AdminTokens); i > 0 {
		return roleAdmin, "admin token " + strconv.Itoa(i)
	}
	if i := tokenAt(tok, s.cfg.Tokens); i > 0 {
		return roleClient, "client token " + strconv.Itoa(i)
	}
	return roleNone, ""
}

// tokenAt returns tok's position in set, from 1, or 0 if it is not
// there, comparing it with every token in constant time.
func tokenAt(tok string, set []string) int {
	at := 0
	for i, t := range set {
		at = subtle.ConstantTimeSelect(subtle.ConstantTimeCompare([]byte(tok), []byte(t)), i+1, at)
	}
	return at
}

// client wraps h: authenticated clients only, within their rate.
func (s *Server) client(h http.HandlerFunc) http.HandlerFunc { return s.guard(roleClient, h) }

// admin wraps h: admin tokens only.
func (s *Server) admin(h http.HandlerFunc) http.HandlerFunc { return s.guard(roleAdmin, h) }

func (s *Server) guard(need role, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		addr := s.clientAddr(r)
		if s.authFails.blocked(addr) {
			tooManyFailures(w)
			return
		}
		got, who := s.roleOf(r)
		switch {
		case got == roleNone:
			if !s.authFails.fail(addr) {
				tooManyFailures(w)
				return
			}
			refuse(w)
			w.Header().Set("WWW-Authenticate", `Bearer realm="dlock"`)
			writeProblem(w, http.StatusUnauthorized, "unauthorized", "Unauthorized",
				"a valid bearer token (Authorization: Bearer ...) or client certificate is required")
			return
		case got < need:
			refuse(w)
			writeProblem(w, http.StatusForbidden, "forbidden", "Forbidden", "this operation needs an admin token")
			return
		}
		if lim := s.limiter(who); !lim.Allow() {
			refuse(w)
			w.Header().Set("Retry-After", retryAfter(time.Duration(float64(time.Second)/s.cfg.RatePerSecond)))
			writeProblem(w, http.StatusTooManyRequests, "rate-limited", "Too many requests",
				"over this client's request rate; retry after the Retry-After seconds")
			return
		}
		h(w, withClient(r, got, who))
	}
}

// limiter returns the client's token bucket. The map is bounded: past
// 10,000 clients it starts over (a flood of new clients resets buckets,
// it never grows memory without bound).
func (s *Server) limiter(who string) *rate.Limiter {
	s.limMu.Lock()
	defer s.limMu.Unlock()
	lim, ok := s.limiters[who]
	if !ok {
		if len(s.limiters) >= 10000 {
			clear(s.limiters)
		}
		lim = rate.NewLimiter(rate.Limit(s.cfg.RatePerSecond), s.cfg.Burst)
		s.limiters[who] = lim
	}
	return lim
}

// login checks the form's token and keeps it in the dashboard's cookie.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	addr := s.clientAddr(r)
	if s.authFails.blocked(addr) {
		tooManyFailures(w)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
	rl, who := s.tokenRole(r.PostFormValue("token"))
	if rl == roleNone {
		if !s.authFails.fail(addr) {
			tooManyFailures(w)
			return
		}
		refuse(w)
		writeLogin(w, http.StatusUnauthorized, "That token is not valid.")
		return
	}
	s.startSession(w, r, rl, who)
}

// startSession signs the browser in (the dashboard's cookie) and sends
// it to the dashboard.
func (s *Server) startSession(w http.ResponseWriter, r *http.Request, rl role, who string) {
	id := s.sessions.add(rl, who, time.Now())
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: id, Path: "/", HttpOnly: true, MaxAge: int(sessionTTL / time.Second),
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(cookieName); err == nil {
		s.sessions.remove(c.Value)
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/", MaxAge: -1, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// page serves the dashboard, or the login form to a browser without a
// valid token.
func (s *Server) page(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Dashboard == nil {
		writeProblem(w, http.StatusNotFound, "not-found", "No dashboard", "this server was started without the dashboard")
		return
	}
	if got, _ := s.roleOf(r); got == roleNone {
		writeLogin(w, http.StatusOK, "")
		return
	}
	s.cfg.Dashboard.ServeHTTP(w, r)
}

func (s *Server) static(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Dashboard == nil {
		http.NotFound(w, r)
		return
	}
	s.cfg.Dashboard.ServeHTTP(w, r)
}

// writeLogin answers with the sign-in form under its own policy.
func writeLogin(w http.ResponseWriter, status int, alert string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", loginCSP)
	w.WriteHeader(status)
	_ = loginPage.Execute(w, alert)
}

// loginPage is the sign-in form; writeLogin sends it under loginCSP.
var loginPage = template.Must(template.New("login").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>dlock — sign in</title>
<style>` + loginStyle + `</style></head>
<body><h1>dlock</h1><p>Sign in with a client token (dlock serve --token-file).</p>
{{if .}}<p role="alert"><strong>{{.}}</strong></p>{{end}}
<form method="post" action="/login"><input type="password" name="token" autocomplete="current-password" autofocus>
<input type="submit" value="Sign in"></form></body></html>
`))
