package dlock_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
)

// hookLog records every hook call as a line.
type hookLog struct {
	mu    sync.Mutex
	lines []string
	ended chan dlock.EndEvent
}

type ctxMark struct{}

func (h *hookLog) add(format string, args ...any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lines = append(h.lines, fmt.Sprintf(format, args...))
}

func (h *hookLog) hooks() dlock.Hooks {
	return dlock.Hooks{
		Acquiring: func(ctx context.Context, info dlock.AcquireInfo) context.Context {
			h.add("acquiring %s %s %s wait=%s", info.Backend, info.Kind, info.Name, info.Wait)
			return context.WithValue(ctx, ctxMark{}, info.Name)
		},
		AcquireDone: func(ctx context.Context, ev dlock.AcquireEvent) {
			fence := uint64(0)
			if ev.Lease != nil {
				fence = ev.Lease.Fence()
			}
			h.add("done %s %s marked=%v fence=%d", ev.Name, ev.Outcome, ctx.Value(ctxMark{}) == ev.Name, fence)
		},
		Refreshed: func(ev dlock.RefreshEvent) { h.add("refreshed %s %s", ev.Lease.Name(), ev.Result) },
		Ended: func(ev dlock.EndEvent) {
			h.add("ended %s %s", ev.Lease.Name(), ev.Reason)
			if h.ended != nil {
				h.ended <- ev
			}
		},
	}
}

func (h *hookLog) take() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.lines
	h.lines = nil
	return out
}

func wantLines(t *testing.T, got []string, want ...string) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("hooks saw\n%q\nwant\n%q", got, want)
	}
}

// TestHooksSeeUserCallsOnly: an acquire, a refused try, a release and a
// loss each reach the hooks once, with the context Acquiring returned; a
// semaphore's inner grants (its queue place) are not reported.
func TestHooksSeeUserCallsOnly(t *testing.T) {
	ctx := context.Background()
	l, err := dlock.Open(ctx, fmt.Sprintf("mem://hooks-%d", time.Now().UnixNano()))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	h := &hookLog{ended: make(chan dlock.EndEvent, 8)}
	l.AddHooks(h.hooks())
	if l.Backend() != "mem" {
		t.Fatalf("Backend() = %q, want mem", l.Backend())
	}

	a, err := l.Acquire(ctx, "a", dlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.TryAcquire(ctx, "a"); err == nil {
		t.Fatal("second TryAcquire of a held lock succeeded")
	}
	if err := a.Refresh(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	<-h.ended
	wantLines(t, h.take(),
		"acquiring mem mutex a wait=30s", "done a acquired marked=true fence=1",
		"acquiring mem mutex a wait=0s", "done a held marked=true fence=0",
		"refreshed a ok",
		"ended a released")

	// A loss: force-released, the watchdog's next refresh finds it gone.
	b, err := l.Acquire(ctx, "b", dlock.WithTTL(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := l.ForceRelease(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-h.ended:
		if ev.Lease != b || ev.Reason == dlock.EndReleased || ev.Held <= 0 {
			t.Fatalf("end of b: %+v", ev)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no Ended for a force-released lease")
	}
	got := h.take()
	if len(got) < 3 || got[0] != "acquiring mem mutex b wait=30s" || !strings.HasPrefix(got[len(got)-1], "ended b ") {
		t.Fatalf("hooks saw %q", got)
	}

	// A semaphore reports the call and its permit, not its inner keys.
	sem, err := l.Semaphore("pool", 1)
	if err != nil {
		t.Fatal(err)
	}
	p, err := sem.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := sem.Acquire(wctx); err == nil {
		t.Fatal("a second permit of a 1-permit semaphore")
	}
	_ = p.Release(ctx)
	<-h.ended
	wantLines(t, h.take(),
		"acquiring mem permit pool wait=30s", "done pool acquired marked=true fence=1",
		"acquiring mem permit pool wait=30s", "done pool held marked=true fence=0",
		"ended pool released")
}

// TestHooksInvalidCallNotReported: a call refused for its arguments never
// reached the backend, and reaches no hook.
func TestHooksInvalidCallNotReported(t *testing.T) {
	l := openMem(t)
	h := &hookLog{}
	l.AddHooks(h.hooks())
	if _, err := l.Acquire(context.Background(), ""); err == nil {
		t.Fatal("empty name accepted")
	}
	wantLines(t, h.take())
}

// TestRemovedHooksAreNotCalled: the remove func AddHooks returns takes
// away that addition only, and a second call does nothing.
func TestRemovedHooksAreNotCalled(t *testing.T) {
	ctx := context.Background()
	l, err := dlock.Open(ctx, fmt.Sprintf("mem://hooks-remove-%d", time.Now().UnixNano()))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var mu sync.Mutex
	calls := map[string]int{}
	count := func(who string) dlock.Hooks {
		return dlock.Hooks{AcquireDone: func(context.Context, dlock.AcquireEvent) {
			mu.Lock()
			calls[who]++
			mu.Unlock()
		}}
	}
	removeA := l.AddHooks(count("a"))
	removeB := l.AddHooks(count("b"))
	l.AddHooks(count("c"))
	cycle := func() {
		ls, err := l.Acquire(ctx, "jobs")
		if err != nil {
			t.Fatal(err)
		}
		if err := ls.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	cycle()
	removeB()
	removeB()
	cycle()
	removeA()
	cycle()
	mu.Lock()
	defer mu.Unlock()
	if calls["a"] != 2 || calls["b"] != 1 || calls["c"] != 3 {
		t.Fatalf("hook calls after removals = %v, want a:2 b:1 c:3", calls)
	}
}
