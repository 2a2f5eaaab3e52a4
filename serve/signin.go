package serve

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/url"
	"sync"
	"time"
)

// A sign-in link opens the dashboard from a terminal: GET
// /signin?t=CODE, opened once in a browser, starts a dashboard session
// (the dlock_session cookie, as POST /login does) and redirects to /.
//
// The code is 128 bits from crypto/rand, valid for SignInTTL and once;
// the server keeps only its SHA-256, and never logs it. A code that is
// unknown, used or expired counts as a failed authentication of the
// client address (the same limit as wrong tokens). A link followed from
// another site's page (Sec-Fetch-Site cross-site or same-site) is
// refused before its code is looked at, and the code stays valid: a page
// cannot sign its visitor in to a session of the page's choosing (login
// CSRF). Opened from a terminal, pasted into the address bar or
// bookmarked, a browser sends Sec-Fetch-Site: none.

// SignInTTL is how long a sign-in link stays valid.
const SignInTTL = 10 * time.Minute

// maxSignIns bounds the links not yet used; past it the one that expires
// first is dropped.
const maxSignIns = 100

// signInStore keeps the unused codes by their SHA-256.
type signInStore struct {
	mu    sync.Mutex
	codes map[[sha256.Size]byte]session
}

func newSignInStore() *signInStore {
	return &signInStore{codes: map[[sha256.Size]byte]session{}}
}

// add makes a code that starts a session of rl for who.
func (st *signInStore) add(rl role, who string, now time.Time) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	code := hex.EncodeToString(b[:])
	st.mu.Lock()
	defer st.mu.Unlock()
	st.expire(now)
	if len(st.codes) >= maxSignIns {
		st.dropFirstToExpire()
	}
	st.codes[sha256.Sum256([]byte(code))] = session{role: rl, who: who, expires: now.Add(SignInTTL)}
	return code
}

// redeem spends code: the session it starts, once, before it expires.
func (st *signInStore) redeem(code string, now time.Time) (session, bool) {
	key := sha256.Sum256([]byte(code))
	st.mu.Lock()
	defer st.mu.Unlock()
	ss, ok := st.codes[key]
	delete(st.codes, key)
	return ss, ok && now.Before(ss.expires)
}

func (st *signInStore) expire(now time.Time) {
	for k, ss := range st.codes {
		if !now.Before(ss.expires) {
			delete(st.codes, k)
		}
	}
}

func (st *signInStore) dropFirstToExpire() {
	var first [sha256.Size]byte
	var at time.Time
	for k, ss := range st.codes {
		if at.IsZero() || ss.expires.Before(at) {
			first, at = k, ss.expires
		}
	}
	delete(st.codes, first)
}

// SignInLink returns the path and query of a new one-time link,
// "/signin?t=CODE", that signs a browser in to the dashboard with the
// strongest role the server's tokens give (admin if it has admin
// tokens), once, within SignInTTL. dlock serve prints it at start. It
// fails when the server has no dashboard, or no tokens (nobody signs in
// to a server without authentication or with client certificates only).
func (s *Server) SignInLink() (string, error) {
	switch {
	case s.cfg.Dashboard == nil:
		return "", errors.New("serve: no dashboard (Config.Dashboard) to sign in to")
	case len(s.cfg.AdminTokens) > 0:
		return s.signInPath(roleAdmin, "sign-in link (admin)"), nil
	case len(s.cfg.Tokens) > 0:
		return s.signInPath(roleClient, "sign-in link (client)"), nil
	}
	return "", errors.New("serve: the server has no tokens (Config.Tokens, Config.AdminTokens): there is no sign-in")
}

func (s *Server) signInPath(rl role, who string) string {
	return "/signin?t=" + url.QueryEscape(s.signIns.add(rl, who, time.Now()))
}

// newSignInLink answers POST /v1/signin-links: a link that signs a
// browser in as the caller (the caller's role and rate limit).
func (s *Server) newSignInLink(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Dashboard == nil || (len(s.cfg.Tokens) == 0 && len(s.cfg.AdminTokens) == 0) {
		writeProblem(w, http.StatusNotFound, "not-found", "No sign-in",
			"this server has no dashboard, or no tokens to sign in with")
		return
	}
	c := clientOf(r)
	path := s.signInPath(c.role, c.who)
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusCreated, map[string]any{"url": scheme + "://" + r.Host + path, "path": path,
		"expires_at": time.Now().Add(SignInTTL).UTC()})
}

// signIn answers GET /signin?t=CODE (see above).
func (s *Server) signIn(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if s.cfg.Dashboard == nil {
		writeProblem(w, http.StatusNotFound, "not-found", "No dashboard", "this server was started without the dashboard")
		return
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "none" && site != "same-origin" {
		refuse(w)
		writeLogin(w, http.StatusForbidden, "A sign-in link works only when opened from outside the browser (a terminal, or pasted in the address bar), not followed from a page.")
		return
	}
	addr := s.clientAddr(r)
	if s.authFails.blocked(addr) {
		tooManyFailures(w)
		return
	}
	ss, ok := s.signIns.redeem(r.URL.Query().Get("t"), time.Now())
	if !ok {
		if !s.authFails.fail(addr) {
			tooManyFailures(w)
			return
		}
		refuse(w)
		writeLogin(w, http.StatusUnauthorized, "That sign-in link is not valid: it was used already, it expired (links last 10 minutes), or it was cut short.")
		return
	}
	s.startSession(w, r, ss.role, ss.who)
}
