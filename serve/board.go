package serve

import (
	"container/list"
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dlockdev/dlock"
)

// Bounds of the dashboard's memory.
const (
	maxEvents    = 200 // recent events kept
	maxTimeline  = 50  // grants kept per name
	maxTimelines = 500 // names with a timeline
)

// boardEvent is one line of the dashboard's recent events.
type boardEvent struct {
	Time   time.Time `json:"time"`
	Type   string    `json:"type"` // granted, released, lost, force-released, handoff
	Name   string    `json:"name"`
	Kind   string    `json:"kind"`
	Fence  uint64    `json:"fence"`
	Owner  string    `json:"owner"`
	Reason string    `json:"reason,omitempty"`
	// Detail is the library's sentence for a loss.
	Detail string `json:"detail,omitempty"`
}

// Where a force-release came from, as its event's Reason says.
const (
	// forcedOutside: a lease of this server ended with the library's
	// LostForceReleased and no force-release through this server
	// followed: dlock release --force, another server, a program.
	forcedOutside = "outside this server (dlock release --force, another server or program)"
	// forcedHere prefixes the reason of a force-release through this
	// server's admin endpoint.
	forcedHere = "through this server"
)

// grantPoint is one grant on a name's fence timeline.
type grantPoint struct {
	Time  time.Time `json:"time"`
	Fence uint64    `json:"fence"`
	Owner string    `json:"owner"`
}

// waiterJSON is one waiter the server knows of: an acquire call waiting
// in this server ("server", since when), or a place in a semaphore's
// queue that the backend lists ("queue"). A process waiting through the
// library (dlock run --wait) on another host is neither: the backends
// do not list their waiters.
type waiterJSON struct {
	Owner string     `json:"owner"`
	Via   string     `json:"via"`
	Since *time.Time `json:"since,omitempty"`
}

// snapshot is what the dashboard shows.
type snapshot struct {
	Now      time.Time               `json:"now"`
	Backend  string                  `json:"backend"`
	Holders  []holderJSON            `json:"holders"`
	Waiters  map[string][]waiterJSON `json:"waiters"`
	Events   []boardEvent            `json:"events"`
	Timeline map[string][]grantPoint `json:"timeline"`
	Error    string                  `json:"error,omitempty"`
}

// board keeps the dashboard's state, fed by the Locker's hooks.
type board struct {
	backend string

	mu       sync.Mutex
	waiting  list.List // of dlock.AcquireInfo: the acquire calls waiting in this server
	events   ring[boardEvent]
	timeline map[string]*ring[grantPoint]
	order    []string      // timeline names, oldest first
	changed  chan struct{} // closed at the next change; nil until watched
	gen      uint64        // counts the changes
}

func newBoard(backend string) *board {
	return &board{backend: backend, events: newRing[boardEvent](maxEvents), timeline: map[string]*ring[grantPoint]{}}
}

type waitKey struct{}

func (b *board) hooks() dlock.Hooks {
	return dlock.Hooks{
		Acquiring: func(ctx context.Context, info dlock.AcquireInfo) context.Context {
			b.mu.Lock()
			w := b.waiting.PushBack(info)
			b.touch()
			b.mu.Unlock()
			return context.WithValue(ctx, waitKey{}, w)
		},
		AcquireDone: func(ctx context.Context, ev dlock.AcquireEvent) {
			b.mu.Lock()
			defer b.mu.Unlock()
			if w, ok := ctx.Value(waitKey{}).(*list.Element); ok {
				b.waiting.Remove(w)
			}
			if ls := ev.Lease; ls != nil {
				b.add(boardEvent{Time: time.Now(), Type: "granted", Name: ls.Name(), Kind: string(ls.Kind()), Fence: ls.Fence(), Owner: ls.Owner()})
				b.grant(ls.Name(), grantPoint{Time: time.Now(), Fence: ls.Fence(), Owner: ls.Owner()})
			}
			b.touch()
		},
		Ended: func(ev dlock.EndEvent) {
			b.mu.Lock()
			defer b.mu.Unlock()
			if e := ended(ev); !b.toldHere(e) {
				b.add(e)
			}
			b.touch()
		},
	}
}

// ended is the event of a lease's end: released; handoff for a lease a
// replica let go (Detach); force-released when the
// library's loss reason is LostForceReleased (the backend pushed the
// eviction, or it went through this Locker); else lost, with the
// library's reason and sentence.
func ended(ev dlock.EndEvent) boardEvent {
	ls := ev.Lease
	e := boardEvent{Time: time.Now(), Type: "released", Name: ls.Name(), Kind: string(ls.Kind()), Fence: ls.Fence(), Owner: ls.Owner()}
	switch ev.Reason {
	case dlock.EndReleased:
		return e
	case dlock.EndDetached:
		e.Type, e.Reason = "handoff", "this server let the lease go for another replica to keep"
		return e
	}
	e.Type, e.Reason = "lost", ev.Reason
	if ev.Err != nil {
		e.Detail = ev.Err.Error()
	}
	if ev.Reason == dlock.LostForceReleased {
		e.Type, e.Reason = "force-released", forcedOutside
	}
	return e
}

// forceReleased records a force-release through this server. When it
// evicted a lease of this server, the lease's end is already on the
// board, as a force-release from outside: that event is told where it
// came from instead of a second one added.
func (b *board) forceReleased(name string, evicted dlock.Holder, ok bool, newFence uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	defer b.touch()
	next := "next fence " + strconv.FormatUint(newFence, 10)
	if !ok {
		b.add(boardEvent{Time: time.Now(), Type: "force-released", Name: name, Fence: newFence, Reason: forcedHere + ": nothing held; " + next})
		return
	}
	for i := range b.events.len() {
		if e := b.events.newest(i); e.Type == "force-released" && e.Name == name && e.Fence == evicted.Fence && e.Reason == forcedOutside {
			e.Reason = forcedHere + "; " + next
			return
		}
	}
	b.add(boardEvent{Time: time.Now(), Type: "force-released", Name: name, Kind: string(evicted.Kind), Fence: evicted.Fence,
		Owner: evicted.Owner, Reason: forcedHere + "; " + next})
}

// toldHere reports whether e, a lease's loss to a force-release, is
// already on the board as a force-release through this server: the
// loss can reach the lease after the server has recorded its own
// force-release (b.mu held).
func (b *board) toldHere(e boardEvent) bool {
	if e.Type != "force-released" {
		return false
	}
	for i := range b.events.len() {
		if o := b.events.newest(i); o.Type == "force-released" && o.Name == e.Name && o.Fence == e.Fence && strings.HasPrefix(o.Reason, forcedHere) {
			return true
		}
	}
	return false
}

// add appends an event (b.mu held).
func (b *board) add(e boardEvent) {
	b.events.add(e)
}

// grant appends a timeline point (b.mu held).
func (b *board) grant(name string, p grantPoint) {
	tl, seen := b.timeline[name]
	if !seen {
		b.order = append(b.order, name)
		if len(b.order) > maxTimelines {
			delete(b.timeline, b.order[0])
			b.order = b.order[1:]
		}
		r := newRing[grantPoint](maxTimeline)
		tl = &r
		b.timeline[name] = tl
	}
	tl.add(p)
}

// touch counts a change and wakes the streams watching (b.mu held). With
// no dashboard open, nobody watches, and no channel is made per change.
func (b *board) touch() {
	b.gen++
	if b.changed != nil {
		close(b.changed)
		b.changed = nil
	}
}

// watch returns the number of changes so far and a channel closed at the
// next one.
func (b *board) watch() (uint64, <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.changed == nil {
		b.changed = make(chan struct{})
	}
	return b.gen, b.changed
}

// snapshot builds the dashboard's view: every holder on the backend, the
// waiters in this server and the queue places in the listing, the recent
// events and timelines.
func (s *Server) snapshot(ctx context.Context) snapshot {
	out := snapshot{Now: time.Now().UTC(), Backend: s.board.backend, Holders: []holderJSON{},
		Waiters: map[string][]waiterJSON{}, Timeline: map[string][]grantPoint{}}
	hs, err := s.l.List(ctx, "")
	if err != nil {
		out.Error = err.Error()
	}
	for _, h := range s.holders(hs, "") {
		if h.Kind == string(dlock.KindQueue) {
			out.Waiters[h.Name] = append(out.Waiters[h.Name], waiterJSON{Owner: h.Owner, Via: "queue"})
			continue
		}
		out.Holders = append(out.Holders, h)
	}
	b := s.board
	b.mu.Lock()
	defer b.mu.Unlock()
	for e := b.waiting.Front(); e != nil; e = e.Next() {
		w := e.Value.(dlock.AcquireInfo)
		since := w.Start.UTC()
		out.Waiters[w.Name] = append(out.Waiters[w.Name], waiterJSON{Owner: w.Owner, Via: "server", Since: &since})
	}
	out.Events = make([]boardEvent, 0, b.events.len())
	for i := range b.events.len() {
		out.Events = append(out.Events, *b.events.newest(i))
	}
	for name, tl := range b.timeline {
		out.Timeline[name] = tl.oldestFirst()
	}
	return out
}
