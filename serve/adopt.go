package serve

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/dlockdev/dlock"
)

// Replicas: several servers on one backend, sharing Config.LeaseKeys,
// serve any lease through any of them. A lease_id is the sealed lease
// (seal.go); a server asked about an id it does not keep opens it,
// checks that it belongs to the asking client, and adopts the lease from
// the backend (Locker.Resume: one token-checked refresh). From then on it
// keeps the lease as its own: its watchdog refreshes it, its events
// streams push its loss. The server a client last talked to keeps the
// lease alive; one the client stopped talking to lets it go after a TTL
// without a sign of life (Lease.Detach, never a release, since the
// client may be talking to another replica), and so does a replica that
// stops. A replica that dies keeps nothing: the client's next renew or
// reconnected events stream reaches another replica, which adopts the
// lease, as long as that happens within the TTL.

// newEntry makes the table entry of a lease this server granted: its id
// is the lease sealed with the client it belongs to.
func (s *Server) newEntry(ls *dlock.Lease, permits int, owner string) *entry {
	now := time.Now()
	id := s.seal.seal(sealed{Handle: ls.Handle(), Owner: owner, Permits: permits, Granted: now.UnixMilli()})
	return &entry{id: id, lease: ls, lastSeen: now, granted: now, permits: permits, owner: owner}
}

// adopt makes the lease that id seals one this server keeps, if it
// belongs to r's client; false means it answered (404 for an id that does
// not open or is another client's, the lease's loss, or the backend's
// error).
func (s *Server) adopt(w http.ResponseWriter, r *http.Request, id string) (*entry, bool) {
	v, err := s.seal.open(id)
	if err == nil && v.Owner != s.ownerOf(r) {
		s.log.Info("dlock serve: a lease's id came from a client other than its own; answered as unknown",
			"owner", v.Owner, "client", s.ownerOf(r), "method", r.Method)
		err = errUnsealed
	}
	if err != nil {
		unknownLease(w)
		return nil, false
	}
	for {
		// An entry this server let go of (detached) is adopted anew.
		if e, ok := s.leases.get(id); ok && !errors.Is(e.lease.Err(), dlock.ErrDetached) {
			return e, true
		}
		wait := s.leases.claim(id)
		if wait == nil {
			break
		}
		select {
		case <-wait:
		case <-r.Context().Done():
			return nil, false
		}
	}
	defer s.leases.unclaim(id)
	ls, err := s.l.Resume(r.Context(), v.Handle)
	if err != nil {
		if !errors.Is(err, dlock.ErrLost) {
			s.log.Warn("dlock serve: could not adopt a lease", "error", err)
		}
		writeError(w, err)
		return nil, false
	}
	e := &entry{id: id, lease: ls, lastSeen: time.Now(), granted: v.grantedAt(), permits: v.Permits, owner: v.Owner}
	if e, ok := s.leases.add(e); ok {
		s.log.Info("dlock serve: adopted a lease another replica granted or kept", "name", ls.Name(), "fence", ls.Fence())
		return e, true
	}
	_, _ = ls.Detach() // closing: leave it to the replica the client turns to next
	writeProblem(w, http.StatusServiceUnavailable, "backend", "Server closing", "the server is shutting down")
	return nil, false
}

// letGo ends this server's keeping of a lease its client no longer talks
// to it about: a single server releases it; a replica detaches it (its
// client may be talking to another replica, which keeps it now; if none
// does, it lapses within its TTL).
func (s *Server) letGo(ls *dlock.Lease) error {
	if s.replicated {
		_, err := ls.Detach()
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return ls.Release(ctx)
}
