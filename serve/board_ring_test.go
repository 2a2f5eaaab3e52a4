package serve

import (
	"context"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	_ "github.com/dlockdev/dlock/memlock"
)

// boardServer is a Server on the in-process backend, for the board's own
// tests.
func boardServer(t *testing.T) *Server {
	t.Helper()
	l, err := dlock.Open(context.Background(), "mem://board-"+t.Name())
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Locker: l, InsecureNoAuth: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(); _ = l.Close() })
	return s
}

// TestBoardKeepsTheNewestEvents: past maxEvents events and maxTimeline
// grants of a name, the dashboard shows the newest, newest event first
// and the timeline oldest first.
func TestBoardKeepsTheNewestEvents(t *testing.T) {
	s := boardServer(t)
	const n = 3*maxEvents + 7
	s.board.mu.Lock()
	for i := range n {
		s.board.add(boardEvent{Type: "granted", Name: "a", Fence: uint64(i + 1)})
		s.board.grant("a", grantPoint{Fence: uint64(i + 1)})
	}
	s.board.mu.Unlock()
	snap := s.snapshot(context.Background())
	if len(snap.Events) != maxEvents {
		t.Fatalf("%d events shown, want %d", len(snap.Events), maxEvents)
	}
	for i, ev := range snap.Events {
		if want := uint64(n - i); ev.Fence != want {
			t.Fatalf("event %d has fence %d, want %d (newest first)", i, ev.Fence, want)
		}
	}
	tl := snap.Timeline["a"]
	if len(tl) != maxTimeline {
		t.Fatalf("%d grants on the timeline, want %d", len(tl), maxTimeline)
	}
	for i, p := range tl {
		if want := uint64(n - maxTimeline + 1 + i); p.Fence != want {
			t.Fatalf("grant %d has fence %d, want %d (oldest first)", i, p.Fence, want)
		}
	}
}

// TestBoardRecordsWithoutCopying: once the board is full, recording an
// event or a grant of a known name allocates nothing: every acquire and
// release of the server records one, and copying the whole history each
// time made them the costliest part of a request.
func TestBoardRecordsWithoutCopying(t *testing.T) {
	s := boardServer(t)
	b := s.board
	b.mu.Lock()
	defer b.mu.Unlock()
	ev := boardEvent{Time: time.Now(), Type: "released", Name: "a", Kind: "lock", Fence: 1, Owner: "o"}
	for range 2 * maxEvents {
		b.add(ev)
		b.grant("a", grantPoint{Fence: 1})
	}
	if got := testing.AllocsPerRun(100, func() { b.add(ev) }); got != 0 {
		t.Errorf("recording an event on a full board: %.1f allocations, want 0", got)
	}
	if got := testing.AllocsPerRun(100, func() { b.grant("a", grantPoint{Fence: 1}) }); got != 0 {
		t.Errorf("recording a grant on a full timeline: %.1f allocations, want 0", got)
	}
}

// TestBoardListsWaitingAcquires: an acquire call waiting in the server is
// on the dashboard from its start to its end, with its owner and start.
func TestBoardListsWaitingAcquires(t *testing.T) {
	s := boardServer(t)
	h := s.board.hooks()
	start := time.Now().Add(-time.Second)
	ctxA := h.Acquiring(context.Background(), dlock.AcquireInfo{Name: "a", Owner: "first", Start: start})
	ctxB := h.Acquiring(context.Background(), dlock.AcquireInfo{Name: "a", Owner: "second", Start: start})
	waiters := func() []waiterJSON { return s.snapshot(context.Background()).Waiters["a"] }
	if w := waiters(); len(w) != 2 || w[0].Owner != "first" || w[1].Owner != "second" || w[0].Via != "server" || !w[0].Since.Equal(start.UTC()) {
		t.Fatalf("two calls waiting: the dashboard shows %+v", w)
	}
	h.AcquireDone(ctxA, dlock.AcquireEvent{Outcome: dlock.OutcomeCanceled})
	if w := waiters(); len(w) != 1 || w[0].Owner != "second" {
		t.Fatalf("the first call ended: the dashboard shows %+v, want the second only", w)
	}
	h.AcquireDone(ctxB, dlock.AcquireEvent{Outcome: dlock.OutcomeCanceled})
	if w := waiters(); len(w) != 0 {
		t.Fatalf("both calls ended: the dashboard shows %+v", w)
	}
}

// TestBoardChangesWithoutViewersAllocateNothing: with no dashboard
// stream open, counting a change makes no channel; a stream that watches
// is woken by the next change.
func TestBoardChangesWithoutViewersAllocateNothing(t *testing.T) {
	b := boardServer(t).board
	b.mu.Lock()
	got := testing.AllocsPerRun(100, b.touch)
	b.mu.Unlock()
	if got != 0 {
		t.Errorf("a change with nobody watching: %.1f allocations, want 0", got)
	}
	gen, changed := b.watch()
	b.mu.Lock()
	b.touch()
	b.mu.Unlock()
	select {
	case <-changed:
	default:
		t.Fatal("a change did not wake the stream watching")
	}
	if g, _ := b.watch(); g != gen+1 {
		t.Errorf("changes counted: %d, want %d", g, gen+1)
	}
}
