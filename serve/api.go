package serve

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/dlockdev/dlock"
)

// routesInit registers every route. Each route is listed in
// openapi.json; a test checks the two agree.
func (s *Server) routesInit() {
	s.handle("POST /v1/locks/{name}/acquire", s.client(jsonIn(s.acquireLock)))
	s.handle("POST /v1/semaphores/{name}/acquire", s.client(jsonIn(s.acquirePermit)))
	s.handle("POST /v1/elections/{name}/campaign", s.client(jsonIn(s.campaign)))
	s.handle("GET /v1/elections/{name}/leader", s.client(s.leader))
	s.handle("GET /v1/leases/{id}", s.client(s.getLease))
	s.handle("POST /v1/leases/{id}/renew", s.client(jsonIn(s.renew)))
	s.handle("DELETE /v1/leases/{id}", s.client(s.release))
	s.handle("GET /v1/leases/{id}/events", s.client(s.events))
	s.handle("GET /v1/locks", s.client(s.list))
	s.handle("GET /v1/locks/{name}", s.client(s.inspect))
	s.handle("POST /v1/locks/{name}/force-release", s.admin(jsonIn(s.forceRelease)))
	s.handle("GET /v1/dashboard", s.client(s.dashboardSnapshot))
	s.handle("GET /v1/dashboard/stream", s.client(s.dashboardStream))
	s.handle("GET /openapi.json", s.openAPI)
	s.handle("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, 200, map[string]string{"status": "ok"}) })
	s.handle("POST /login", s.login)
	s.handle("POST /logout", s.logout)
	s.handle("GET /signin", s.signIn)
	s.handle("POST /v1/signin-links", s.client(jsonIn(s.newSignInLink)))
	s.handle("GET /metrics", s.client(s.metrics))
	s.handle("GET /{$}", s.page)
	s.handle("GET /static/", s.client(s.static))
}

func (s *Server) handle(pattern string, h http.HandlerFunc) {
	s.routes = append(s.routes, pattern)
	s.mux.HandleFunc(pattern, h)
}

// lockBody is the body of POST /v1/locks/{name}/acquire.
type lockBody struct {
	TTLms  *int64 `json:"ttl_ms"`
	WaitMs *int64 `json:"wait_ms"`
	Owner  string `json:"owner"`
}

// semaphoreBody is the body of POST /v1/semaphores/{name}/acquire.
type semaphoreBody struct {
	lockBody
	Permits int `json:"permits"`
}

// campaignBody is the body of POST /v1/elections/{name}/campaign.
type campaignBody struct {
	Value  string `json:"value"`
	TTLms  *int64 `json:"ttl_ms"`
	WaitMs *int64 `json:"wait_ms"`
}

// renewBody is the body of POST /v1/leases/{id}/renew.
type renewBody struct {
	TTLms *int64 `json:"ttl_ms"`
}

// forceBody is the body of POST /v1/locks/{name}/force-release.
type forceBody struct {
	Permit   *int `json:"permit"`
	Permits  int  `json:"permits"`
	Election bool `json:"election"`
}

func (s *Server) acquireLock(w http.ResponseWriter, r *http.Request) {
	var b lockBody
	if !s.decode(w, r, &b) {
		return
	}
	opts, err := options(b.TTLms, b.WaitMs, b.Owner)
	if err != nil {
		writeError(w, err)
		return
	}
	ls, err := s.l.Acquire(r.Context(), r.PathValue("name"), opts...)
	s.granted(w, r, ls, 0, scrub(err, echo{"owner", "owner", b.Owner}, echo{value: r.PathValue("name")}))
}

func (s *Server) acquirePermit(w http.ResponseWriter, r *http.Request) {
	var b semaphoreBody
	if !s.decode(w, r, &b) {
		return
	}
	if b.Permits == 0 {
		invalidf(w, "permits is required (the semaphore's size, 1 to %d)", dlock.MaxPermits)
		return
	}
	opts, err := options(b.TTLms, b.WaitMs, b.Owner)
	if err != nil {
		writeError(w, err)
		return
	}
	sent := []echo{{"owner", "owner", b.Owner}, {value: r.PathValue("name")}}
	sem, err := s.l.Semaphore(r.PathValue("name"), b.Permits)
	if err != nil {
		writeError(w, scrub(err, sent...))
		return
	}
	ls, err := sem.Acquire(r.Context(), opts...)
	s.granted(w, r, ls, b.Permits, scrub(err, sent...))
}

func (s *Server) campaign(w http.ResponseWriter, r *http.Request) {
	var b campaignBody
	if !s.decode(w, r, &b) {
		return
	}
	opts, err := options(b.TTLms, b.WaitMs, "")
	if err != nil {
		writeError(w, err)
		return
	}
	// The library publishes the value as the leader's owner, and names
	// it so in its errors.
	sent := []echo{{"owner", "value", b.Value}, {value: r.PathValue("name")}}
	e, err := s.l.Election(r.PathValue("name"))
	if err != nil {
		writeError(w, scrub(err, sent...))
		return
	}
	ls, err := e.Campaign(r.Context(), b.Value, opts...)
	s.granted(w, r, ls, 0, scrub(err, sent...))
}

// granted answers an acquire: the new lease, or the error. A lease won
// after the client went away, or while the server closes, is released
// at once: nobody would keep it.
func (s *Server) granted(w http.ResponseWriter, r *http.Request, ls *dlock.Lease, permits int, err error) {
	if err != nil {
		writeError(w, err)
		return
	}
	if r.Context().Err() != nil {
		_ = ls.Release(context.WithoutCancel(r.Context()))
		return
	}
	e, ok := s.leases.add(s.newEntry(ls, permits, s.ownerOf(r)))
	if !ok {
		_ = ls.Release(context.Background())
		writeProblem(w, http.StatusServiceUnavailable, "backend", "Server closing", "the server is shutting down")
		return
	}
	writeJSON(w, http.StatusOK, toLease(e, false))
}

func (s *Server) getLease(w http.ResponseWriter, r *http.Request) {
	if e, ok := s.lookup(w, r); ok {
		writeJSON(w, http.StatusOK, toLease(e, true))
	}
}

func (s *Server) renew(w http.ResponseWriter, r *http.Request) {
	e, ok := s.lookup(w, r)
	if !ok {
		return
	}
	var b renewBody
	if !s.decode(w, r, &b) {
		return
	}
	if err := e.lease.Err(); err != nil {
		writeError(w, err)
		return
	}
	s.leases.touch(e)
	if b.TTLms != nil {
		ttl, err := ttlOf(*b.TTLms)
		if err == nil {
			err = e.lease.Refresh(r.Context(), ttl)
		}
		if err != nil {
			writeError(w, err)
			return
		}
	}
	writeJSON(w, http.StatusOK, toLease(e, false))
}

func (s *Server) release(w http.ResponseWriter, r *http.Request) {
	e, ok := s.lookup(w, r)
	if !ok {
		return
	}
	err := e.lease.Release(r.Context()) // a lease lost before says why
	s.leases.remove(e)
	if err != nil && !errors.Is(err, dlock.ErrReleased) {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	hs, err := s.l.List(r.Context(), r.URL.Query().Get("prefix"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"holders": s.holders(hs, "")})
}

func (s *Server) inspect(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if err := dlock.CheckName(name); err != nil {
		writeError(w, scrub(err, echo{value: name}))
		return
	}
	hs, err := s.l.List(r.Context(), name)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"name": name, "holders": s.holders(hs, name)})
}

// holders converts a listing, keeping only name's holders when name is
// set, with the age of the grants this server made.
func (s *Server) holders(hs []dlock.Holder, name string) []holderJSON {
	ages := s.leases.ages()
	out := make([]holderJSON, 0, len(hs))
	for _, h := range hs {
		if name != "" && h.Name != name {
			continue
		}
		j := toHolder(h)
		if t, ok := ages[ageKey{h.Name, h.Fence}]; ok {
			age := time.Since(t).Milliseconds()
			j.AgeMs = &age
		}
		out = append(out, j)
	}
	return out
}

func (s *Server) leader(w http.ResponseWriter, r *http.Request) {
	e, err := s.l.Election(r.PathValue("name"))
	if err != nil {
		writeError(w, err)
		return
	}
	h, ok, err := e.Leader(r.Context())
	switch {
	case err != nil:
		writeError(w, err)
	case !ok:
		writeProblem(w, http.StatusNotFound, "not-found", "No leader", fmt.Sprintf("election %q has no leader", e.Name()))
	default:
		writeJSON(w, http.StatusOK, toHolder(h))
	}
}

func (s *Server) forceRelease(w http.ResponseWriter, r *http.Request) {
	var b forceBody
	if !s.decode(w, r, &b) {
		return
	}
	name := r.PathValue("name")
	var (
		evicted  dlock.Holder
		ok       bool
		newFence uint64
		err      error
	)
	switch {
	case b.Permit != nil:
		if b.Permits == 0 {
			invalidf(w, "permit %d given without permits (the semaphore's size)", *b.Permit)
			return
		}
		var sem *dlock.Semaphore
		if sem, err = s.l.Semaphore(name, b.Permits); err == nil {
			evicted, ok, newFence, err = sem.ForceRelease(r.Context(), *b.Permit)
		}
	case b.Election:
		var e *dlock.Election
		if e, err = s.l.Election(name); err == nil {
			evicted, ok, newFence, err = e.ForceRelease(r.Context())
		}
	default:
		evicted, ok, newFence, err = s.l.ForceRelease(r.Context(), name)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	out := map[string]any{"evicted": nil, "new_fence": newFence}
	if ok {
		h := toHolder(evicted)
		out["evicted"] = h
	}
	s.board.forceReleased(name, evicted, ok, newFence)
	s.log.Info("dlock serve: force-release", "name", name, "evicted", ok, "new_fence", newFence)
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Metrics == nil {
		writeProblem(w, http.StatusNotFound, "not-found", "No metrics", "this server was started without metrics")
		return
	}
	s.cfg.Metrics.ServeHTTP(w, r)
}

// bearer returns the Authorization header's bearer token (the scheme's
// name is case-insensitive, RFC 9110).
func bearer(r *http.Request) string {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(tok)
}
