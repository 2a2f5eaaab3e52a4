package serve

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/dlockdev/dlock"
)

// pingEvery is how often an idle events stream gets a comment, so that
// proxies and clients see it alive.
const pingEvery = 15 * time.Second

// sse starts an event stream; false means it answered with an error.
func sse(w http.ResponseWriter) (http.Flusher, bool) {
	f, ok := w.(http.Flusher)
	if !ok {
		writeProblem(w, http.StatusInternalServerError, "unsupported", "No streaming", "this connection cannot stream")
		return nil, false
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	return f, true
}

// sendEvent writes one event.
func sendEvent(w http.ResponseWriter, f http.Flusher, event string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, data); err != nil {
		return err
	}
	f.Flush()
	return nil
}

// lostJSON is the data of a "lost" event.
type lostJSON struct {
	Reason string `json:"reason"`
	Detail string `json:"detail"`
}

// events streams a lease's life: "held" at once (if it is), then "lost" the moment
// the server's watchdog learns of a loss, or "released"; the stream then
// ends. While it is open, the lease's client counts as alive.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	e, ok := s.lookup(w, r)
	if !ok {
		return
	}
	f, ok := sse(w)
	if !ok {
		return
	}
	s.leases.stream(e, +1)
	defer s.leases.stream(e, -1)
	// A stream opened on a lease that already ended gets its end at once.
	if e.lease.Err() == nil && sendEvent(w, f, "held", toLease(e, true)) != nil {
		return
	}
	ping := time.NewTicker(pingEvery)
	defer ping.Stop()
	for {
		select {
		case <-e.lease.Done():
			sendEnd(w, f, e)
			return
		case <-ping.C:
			if _, err := fmt.Fprint(w, ": ping\n\n"); err != nil {
				return
			}
			f.Flush()
		case <-r.Context().Done():
			return
		case <-s.stop:
			// Close released the lease before it stopped the streams.
			select {
			case <-e.lease.Done():
				sendEnd(w, f, e)
			default:
			}
			return
		}
	}
}

// handoffDetail is the detail of a "handoff" event.
const handoffDetail = "this replica no longer keeps the lease (it is stopping): follow it through another replica " +
	"(or this one again) within its TTL to keep it"

// sendEnd writes the event that ends a lease's stream: "lost" with the
// reason, "released", or, from a replica that stops, "handoff".
func sendEnd(w http.ResponseWriter, f http.Flusher, e *entry) {
	err := e.lease.Err()
	var lost *dlock.LostError
	switch {
	case errors.As(err, &lost):
		_ = sendEvent(w, f, "lost", lostJSON{Reason: lost.Reason, Detail: err.Error()})
	case errors.Is(err, dlock.ErrLost):
		_ = sendEvent(w, f, "lost", lostJSON{Reason: dlock.LostExpired, Detail: err.Error()})
	case errors.Is(err, dlock.ErrDetached):
		_ = sendEvent(w, f, "handoff", map[string]string{"detail": handoffDetail})
	default:
		_ = sendEvent(w, f, "released", map[string]string{"lease_id": e.id})
	}
}
