package serve

import (
	"context"
	"errors"
	"net/http"

	"github.com/dlockdev/dlock"
)

// A lease belongs to the client that took it: the same token (the same
// position in Config.Tokens or Config.AdminTokens, or a dashboard
// session signed in with it), or a certificate with the same subject.
// Another client, an admin included, asking for it by its lease_id is
// answered as if the id were unknown (404), so that it learns nothing,
// not even that the lease exists. Without authentication
// (Config.InsecureNoAuth) every client is one: anyone who can connect
// may act on any lease.

// anyone owns the leases of a server without authentication.
const anyone = "anyone (no authentication)"

// clientKey is the request context's key of its authenticated client.
type clientKey struct{}

// client is who a request comes from, as the guard authenticated it.
type client struct {
	role role
	// who names the client (roleOf); it never holds a secret.
	who string
}

// withClient is r carrying its authenticated client.
func withClient(r *http.Request, rl role, who string) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), clientKey{}, client{rl, who}))
}

// clientOf is the client the guard authenticated for r.
func clientOf(r *http.Request) client {
	c, _ := r.Context().Value(clientKey{}).(client)
	return c
}

// ownerOf names the client a lease taken by r belongs to.
func (s *Server) ownerOf(r *http.Request) string {
	if s.cfg.InsecureNoAuth {
		return anyone
	}
	return clientOf(r).who
}

// lookup finds the lease named by the path, if it belongs to r's client,
// adopting it when this replica does not keep it (adopt.go); false means
// it answered (404 for an id that is unknown or another client's).
func (s *Server) lookup(w http.ResponseWriter, r *http.Request) (*entry, bool) {
	id := r.PathValue("id")
	e, ok := s.leases.get(id)
	if s.replicated && (!ok || errors.Is(e.lease.Err(), dlock.ErrDetached)) {
		return s.adopt(w, r, id)
	}
	if !ok {
		unknownLease(w)
		return nil, false
	}
	if e.owner != s.ownerOf(r) {
		s.log.Info("dlock serve: a lease's id came from a client other than its own; answered as unknown",
			"name", e.lease.Name(), "fence", e.lease.Fence(), "owner", e.owner, "client", s.ownerOf(r), "method", r.Method)
		unknownLease(w)
		return nil, false
	}
	return e, true
}

// unknownLease answers 404 for a lease id: it says the same for an id
// that never existed and for another client's.
func unknownLease(w http.ResponseWriter) {
	writeProblem(w, http.StatusNotFound, "not-found", "Unknown lease",
		"no lease with this id: it was released, forgotten a minute after it was lost, or never existed")
}
