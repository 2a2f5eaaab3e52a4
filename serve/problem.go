package serve

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/dlockdev/dlock"
)

// problemBase prefixes every problem type.
const problemBase = "https://dlock.dev/problems/"

// problem is an RFC 9457 problem document.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
	// Holder is set for "held": who holds the lock.
	Holder *holderJSON `json:"holder,omitempty"`
	// Reason is set for "lost": why the lease was lost.
	Reason string `json:"reason,omitempty"`
}

// writeProblem answers with a problem document.
func writeProblem(w http.ResponseWriter, status int, slug, title, detail string) {
	writeProblemDoc(w, problem{Type: problemBase + slug, Title: title, Status: status, Detail: detail})
}

func writeProblemDoc(w http.ResponseWriter, p problem) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(p)
}

// refuse makes the answer being written the connection's last, without
// reading what is left of the request's body: a refused client (no
// token, over a limit) cannot keep the connection by sending slowly.
func refuse(w http.ResponseWriter) {
	w.Header().Set("Connection", "close")
	_ = http.NewResponseController(w).SetReadDeadline(time.Now())
}

// writeError maps a library error to its problem, with the library's
// wording as the detail.
func writeError(w http.ResponseWriter, err error) {
	var held *dlock.HeldError
	var lost *dlock.LostError
	p := problem{Detail: err.Error()}
	switch {
	case errors.Is(err, dlock.ErrInvalidArgument):
		p.Status, p.Type, p.Title = 400, "invalid-argument", "Invalid argument"
	case errors.Is(err, dlock.ErrKindMismatch):
		p.Status, p.Type, p.Title = 409, "kind-mismatch", "Name in use as another kind"
	case errors.As(err, &held):
		p.Status, p.Type, p.Title = 409, "held", "Held by another holder"
		h := toHolder(held.Holder)
		p.Holder = &h
	case errors.As(err, &lost):
		p.Status, p.Type, p.Title, p.Reason = 410, "lost", "Lease lost", lost.Reason
	case errors.Is(err, dlock.ErrLost):
		p.Status, p.Type, p.Title = 410, "lost", "Lease lost"
	case errors.Is(err, dlock.ErrUnsupported):
		p.Status, p.Type, p.Title = 501, "unsupported", "Not supported by this backend"
	case errors.Is(err, dlock.ErrNotAcquired):
		p.Status, p.Type, p.Title = 409, "held", "Held by another holder"
	default:
		p.Status, p.Type, p.Title = 503, "backend", "Backend unavailable"
	}
	p.Type = problemBase + p.Type
	writeProblemDoc(w, p)
}

// invalidf answers 400 naming the problem.
func invalidf(w http.ResponseWriter, format string, args ...any) {
	writeProblem(w, http.StatusBadRequest, "invalid-argument", "Invalid argument", fmt.Sprintf(format, args...))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// holderJSON is a Holder on the wire.
type holderJSON struct {
	Name    string `json:"name"`
	Kind    string `json:"kind"`
	Owner   string `json:"owner"`
	Fence   uint64 `json:"fence"`
	TTLms   int64  `json:"ttl_ms"` // -1: unknown or session-bound
	Permits int    `json:"permits"`
	Slot    int    `json:"slot"`
	// AgeMs is set for the leases this server granted.
	AgeMs *int64 `json:"age_ms,omitempty"`
	// Value is a leader's published value (its Owner), as campaigned.
	Value string `json:"value,omitempty"`
}

func toHolder(h dlock.Holder) holderJSON {
	ttl := int64(-1)
	if h.TTL >= 0 {
		ttl = h.TTL.Milliseconds()
	}
	return holderJSON{Name: h.Name, Kind: string(h.Kind), Owner: h.Owner, Fence: h.Fence, TTLms: ttl, Permits: h.Permits, Slot: h.Slot,
		Value: leaderValue(h.Kind, h.Owner)}
}

// leaseJSON is a lease on the wire. LeaseID is the client's handle, not
// the backend token, which never leaves the server.
type leaseJSON struct {
	LeaseID   string    `json:"lease_id"`
	Name      string    `json:"name"`
	Kind      string    `json:"kind"`
	Fence     uint64    `json:"fence"`
	TTLms     int64     `json:"ttl_ms"`
	ExpiresAt time.Time `json:"expires_at"`
	Owner     string    `json:"owner"`
	Slot      int       `json:"slot"`
	Permits   int       `json:"permits"`
	State     string    `json:"state,omitempty"`
	Value     string    `json:"value,omitempty"` // a leader's published value
}

func toLease(e *entry, withState bool) leaseJSON {
	ls := e.lease
	out := leaseJSON{LeaseID: e.id, Name: ls.Name(), Kind: string(ls.Kind()), Fence: ls.Fence(),
		TTLms: ls.TTL().Milliseconds(), ExpiresAt: time.Now().Add(time.Until(ls.Expires())).UTC(),
		Owner: ls.Owner(), Slot: ls.Slot(), Permits: e.permits, Value: leaderValue(ls.Kind(), ls.Owner())}
	if withState {
		out.State = leaseState(ls)
	}
	return out
}

// leaderValue is a leader's published value: the library keeps it as the
// holder's owner; the API calls it value, as the campaign does.
func leaderValue(k dlock.Kind, owner string) string {
	if k == dlock.KindLeader {
		return owner
	}
	return ""
}

func leaseState(ls *dlock.Lease) string {
	switch err := ls.Err(); {
	case err == nil:
		return "held"
	case errors.Is(err, dlock.ErrReleased):
		return "released"
	}
	return "lost"
}

// retryAfter is the Retry-After header value for d, in whole seconds.
func retryAfter(d time.Duration) string {
	return strconv.Itoa(int(max(1, (d+time.Second-1)/time.Second)))
}
