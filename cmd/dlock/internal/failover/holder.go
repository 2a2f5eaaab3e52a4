package failover

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/dlockdev/dlock/cmd/dlock/internal/servebench"
)

// retryPause is how long a client waits after every replica of its list
// failed it in a row, before it tries them again.
const retryPause = 50 * time.Millisecond

// holderState is where a held-lease client is.
type holderState int

const (
	starting  holderState = iota // its first stream is opening
	streaming                    // its stream said "held" and is open
	away                         // its stream broke; it is finding another replica
	lost                         // it learned that its lease is gone
)

// holder is a client that holds one lease on a name of its own and
// follows it on an events stream; on a break it turns at once to the next
// replica of its list, renews there and opens the stream there.
type holder struct {
	index int
	name  string
	eps   []*endpoint // its address list, with its own token
	id    string

	mu      sync.Mutex
	cur     int // the replica of eps it talks to
	state   holderState
	brokeAt time.Time       // when its stream broke, while away
	backs   []time.Duration // for each break, until "held" again
	cause   string          // why it counts its lease lost
	forced  time.Time       // when its lease was force-released on purpose
	push    time.Duration   // from forced until it heard of the loss
	errs    int             // answers that were neither the lease nor its loss
}

// follow keeps the lease's stream open, moving from replica to replica,
// until the lease is lost or ctx ends.
func (h *holder) follow(ctx context.Context) {
	for ctx.Err() == nil {
		err := h.stream(ctx)
		if ctx.Err() != nil || h.isLost() {
			return
		}
		if s := statusOf(err); s == http.StatusNotFound || s == http.StatusGone {
			h.lose("events-"+httpCode(s), time.Now())
			return
		}
		h.broke(time.Now())
		if !h.renewElsewhere(ctx) {
			return
		}
	}
}

// stream opens the events stream on the current replica and reads it
// until it ends; an end event marks the lease lost.
func (h *holder) stream(ctx context.Context) error {
	body, err := h.endpoint().events(ctx, h.id)
	if err != nil {
		return err
	}
	defer body.Close()
	var end, reason string
	err = servebench.ReadEvents(body, func(event, data string) {
		switch event {
		case "held":
			h.held(time.Now())
		case "lost", "released":
			if end == "" {
				end, reason = event, lostReason(data)
				h.lose(event+"-event"+reason, time.Now())
			}
		}
	})
	return err
}

// renewElsewhere turns to the next replica of the list and renews there,
// going round the list until a renew succeeds (true), the lease is lost
// or ctx ends (false).
func (h *holder) renewElsewhere(ctx context.Context) bool {
	for failed := 0; ctx.Err() == nil; {
		ep := h.next()
		err := ep.renew(ctx, h.id)
		switch s := statusOf(err); {
		case err == nil:
			return true
		case s == http.StatusNotFound || s == http.StatusGone:
			h.lose("renew-"+httpCode(s), time.Now())
			return false
		case s > 0:
			h.mu.Lock()
			h.errs++
			h.mu.Unlock()
		}
		if failed++; failed%len(h.eps) == 0 {
			sleep(ctx, retryPause)
		}
	}
	return false
}

// endpoint is the replica the client talks to now.
func (h *holder) endpoint() *endpoint {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.eps[h.cur]
}

// next moves to the next replica of the list and returns it.
func (h *holder) next() *endpoint {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.cur = (h.cur + 1) % len(h.eps)
	return h.eps[h.cur]
}

// held records a "held" event: the stream is open, and back if it broke.
func (h *holder) held(at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.state == lost {
		return
	}
	if !h.brokeAt.IsZero() {
		h.backs = append(h.backs, at.Sub(h.brokeAt))
		h.brokeAt = time.Time{}
	}
	h.state = streaming
}

// broke records that the stream ended without an end event (or could not
// be opened): the client is away until "held" comes again.
func (h *holder) broke(at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.state == lost {
		return
	}
	if h.brokeAt.IsZero() {
		h.brokeAt = at
	}
	h.state = away
}

// lose records that the client learned its lease is gone, and how; the
// first cause stays. A loss heard after the lease was force-released on
// purpose is its lost push, not a loss.
func (h *holder) lose(cause string, at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.state == lost {
		return
	}
	h.state = lost
	if !h.forced.IsZero() {
		h.push, h.cause = at.Sub(h.forced), "force-released on purpose"
		return
	}
	h.cause = cause
}

// force marks the lease as force-released on purpose, before the request
// is sent; false if the client is not streaming (then it is left alone).
func (h *holder) force(at time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.state != streaming || !h.forced.IsZero() {
		return false
	}
	h.forced = at
	return true
}

// unforce undoes force when the force-release was not done.
func (h *holder) unforce() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.forced = time.Time{}
}

func (h *holder) isLost() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.state == lost
}

// settled reports whether the client is streaming (and not waiting to
// hear of a force-release) or has lost its lease.
func (h *holder) settled() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return (h.state == streaming && h.forced.IsZero()) || h.state == lost
}

// check is the final check of a lease the client still believes held:
// the replica it streams from must say "held".
func (h *holder) check(ctx context.Context) {
	h.mu.Lock()
	state := h.state
	h.mu.Unlock()
	switch state {
	case lost:
		return
	case streaming:
	default:
		h.lose("not-back", time.Now())
		return
	}
	ls, err := h.endpoint().get(ctx, h.id)
	if err == nil && ls.State == "held" {
		return
	}
	cause := "final-check-" + ls.State
	if err != nil {
		cause = "final-check-" + httpCode(statusOf(err))
	}
	h.lose(cause, time.Now())
}

// lostReason is the reason of a lost event's data, as ": reason", or "".
func lostReason(data string) string {
	var d struct {
		Reason string `json:"reason"`
	}
	if json.Unmarshal([]byte(data), &d) != nil || d.Reason == "" {
		return ""
	}
	return ": " + d.Reason
}

// httpCode names a status for a cause: "404", or "unreachable".
func httpCode(status int) string {
	switch {
	case status == 0:
		return "unreachable"
	case status < 0:
		return "canceled"
	}
	return strconv.Itoa(status)
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
