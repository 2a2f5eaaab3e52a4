package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// The dashboard's snapshot is one for all its viewers: built when a
// viewer (a stream or a poll) needs one and the last is stale, at most
// once per streamMinGap after a change and once per streamInterval
// otherwise, whatever the number of viewers; with none, the backend is
// not listed at all.
const (
	streamMinGap   = 100 * time.Millisecond
	streamInterval = 2 * time.Second
	// DefaultMaxDashboardStreams bounds one client's dashboard streams.
	DefaultMaxDashboardStreams = 16
	// listTimeout bounds one listing of the backend for the dashboard.
	listTimeout = 10 * time.Second
)

// shared is the last snapshot, marshaled once for every viewer.
type shared struct {
	mu   sync.Mutex // held while one is built: the others wait for it
	data []byte
	gen  uint64    // the board's changes it reflects
	at   time.Time // when it was built
}

// current returns the snapshot a viewer should see now, building one only
// if the last is stale: older than streamMinGap with a change since, or
// older than streamInterval.
func (s *Server) current(ctx context.Context) (data []byte, gen uint64, at time.Time) {
	sh := &s.shared
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now := time.Now()
	g, _ := s.board.watch()
	age := now.Sub(sh.at)
	if sh.data != nil && (age < streamMinGap || (g == sh.gen && age < streamInterval)) {
		return sh.data, sh.gen, sh.at
	}
	// The listing serves every viewer: the one asking may leave meanwhile.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), listTimeout)
	defer cancel()
	data, err := json.Marshal(s.snapshot(ctx))
	if err != nil {
		panic("serve: marshal the dashboard snapshot: " + err.Error()) // plain data: cannot happen
	}
	sh.data, sh.gen, sh.at = data, g, now
	return sh.data, sh.gen, sh.at
}

// forViewer prefixes the shared snapshot with what is the viewer's own:
// age_ms, how old the snapshot is, so that the page counts its TTLs down
// from when it was taken, and can_force_release, whether the viewer is
// an admin (the page then offers force-release; the endpoint decides).
func forViewer(data []byte, at time.Time, c client) []byte {
	age := strconv.FormatInt(time.Since(at).Milliseconds(), 10)
	out := make([]byte, 0, len(data)+len(age)+40)
	out = append(out, `{"age_ms":`...)
	out = append(out, age...)
	out = append(out, `,"can_force_release":`...)
	out = strconv.AppendBool(out, c.role == roleAdmin)
	out = append(out, ',')
	return append(out, data[1:]...)
}

func (s *Server) dashboardSnapshot(w http.ResponseWriter, r *http.Request) {
	data, _, at := s.current(r.Context())
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(forViewer(data, at, clientOf(r)))
}

// dashboardStream sends the shared snapshot at once, after every change
// (at most one per streamMinGap) and every streamInterval. Each client
// has at most Config.MaxDashboardStreams open.
func (s *Server) dashboardStream(w http.ResponseWriter, r *http.Request) {
	c := clientOf(r)
	if !s.viewers.take(c.who) {
		w.Header().Set("Retry-After", "10")
		writeProblem(w, http.StatusTooManyRequests, "rate-limited", "Too many dashboard streams",
			fmt.Sprintf("this client has %d dashboard streams open already; close one, or poll GET /v1/dashboard", s.cfg.MaxDashboardStreams))
		return
	}
	defer s.viewers.give(c.who)
	f, ok := sse(w)
	if !ok {
		return
	}
	for {
		data, gen, at := s.current(r.Context())
		if _, err := fmt.Fprintf(w, "event: snapshot\ndata: %s\n\n", forViewer(data, at, c)); err != nil {
			return
		}
		f.Flush()
		if !s.pause(r, streamMinGap) {
			return
		}
		g, changed := s.board.watch()
		if g != gen {
			continue // changed since that snapshot was taken
		}
		if !s.waitChange(r, changed, time.Until(at.Add(streamInterval))) {
			return
		}
	}
}

// pause waits d; false means the client left or the server closes.
func (s *Server) pause(r *http.Request, d time.Duration) bool {
	return s.waitChange(r, nil, d)
}

// waitChange waits for changed to close or d to pass; false means the
// client left or the server closes.
func (s *Server) waitChange(r *http.Request, changed <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-changed:
	case <-t.C:
	case <-r.Context().Done():
		return false
	case <-s.stop:
		return false
	}
	return true
}
