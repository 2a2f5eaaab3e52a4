package dlockotel

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// TestGrantedLockSpan: a granted lock makes one span, a child of the
// caller's, open across the hold, with the events acquired, refreshed and
// released and the lock's attributes; never the token or the owner.
func TestGrantedLockSpan(t *testing.T) {
	backends(t, func(t *testing.T, url string) {
		x := newTraced(t, url)
		ctx, caller := x.caller(t.Context())
		lease, err := x.l.Acquire(ctx, "jobs/nightly", dlock.WithOwner("secret-owner"))
		if err != nil {
			t.Fatal(err)
		}
		if err := lease.Refresh(ctx, time.Minute); err != nil {
			t.Fatal(err)
		}
		if n := len(x.rec.Ended()); n != 0 {
			t.Fatalf("%d spans ended while the lease is held, want 0", n)
		}
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
		caller.End()
		x.mapsEmpty(t)

		s := x.lockSpans(t, 1)[0]
		if s.Name() != "dlock.lock mutex" {
			t.Errorf("span name %q, want %q", s.Name(), "dlock.lock mutex")
		}
		if s.Parent().SpanID() != caller.SpanContext().SpanID() || s.Parent().TraceID() != caller.SpanContext().TraceID() {
			t.Errorf("lock span's parent %v, want the caller's span %v", s.Parent().SpanID(), caller.SpanContext().SpanID())
		}
		if got := strings.Join(eventNames(s), ","); got != "acquired,refreshed,released" {
			t.Errorf("events %s, want acquired,refreshed,released", got)
		}
		scheme, _, _ := strings.Cut(url, ":")
		fence := strconv.FormatUint(lease.Fence(), 10)
		wantAttrs(t, "span", s.Attributes(), map[string]string{
			"dlock.backend": scheme, "dlock.name": "jobs/nightly", "dlock.kind": "mutex",
			"dlock.wait_ms": "30000", "dlock.outcome": "acquired", "dlock.fence": fence,
			"service.role": "test",
		})
		wantAttrs(t, "acquired event", s.Events()[0].Attributes, map[string]string{"dlock.fence": fence})
		if _, ok := attrs(s.Events()[0].Attributes)["dlock.waited_ms"]; !ok {
			t.Errorf("acquired event has no dlock.waited_ms: %v", s.Events()[0].Attributes)
		}
		if s.Status().Code != codes.Unset {
			t.Errorf("status %v %q, want Unset", s.Status().Code, s.Status().Description)
		}
		noSecret(t, s, lease)
	})
}

// TestTryAcquireHeldSpan: a TryAcquire of a held lock ends its span at
// once with outcome held, not as an error.
func TestTryAcquireHeldSpan(t *testing.T) {
	backends(t, func(t *testing.T, url string) {
		x := newTraced(t, url)
		lease, err := x.l.Acquire(t.Context(), "busy")
		if err != nil {
			t.Fatal(err)
		}
		defer lease.Release(context.Background())
		if _, err := x.l.TryAcquire(t.Context(), "busy"); !errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatalf("TryAcquire of a held lock: %v, want ErrNotAcquired", err)
		}
		s := x.lockSpans(t, 1)[0]
		wantAttrs(t, "span", s.Attributes(), map[string]string{
			"dlock.name": "busy", "dlock.outcome": "held", "dlock.wait_ms": "0",
		})
		if s.Status().Code != codes.Unset || len(s.Events()) != 0 {
			t.Errorf("held span: status %v, events %v; want Unset, none", s.Status().Code, eventNames(s))
		}
	})
}

// TestLostLeaseSpan: a lease lost to a force-release ends its span with
// status Error, the loss's reason and a lost event, and leaves no entry
// in the maps.
func TestLostLeaseSpan(t *testing.T) {
	backends(t, func(t *testing.T, url string) {
		x := newTraced(t, url)
		lease, err := x.l.Acquire(t.Context(), "doomed", dlock.WithTTL(300*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		if _, _, _, err := x.l.ForceRelease(t.Context(), "doomed"); err != nil {
			t.Fatal(err)
		}
		select {
		case <-lease.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("the force-released lease was not lost within 5s")
		}
		var lost *dlock.LostError
		if !errors.As(lease.Err(), &lost) {
			t.Fatalf("lease.Err() = %v, want a *dlock.LostError", lease.Err())
		}
		s := x.lockSpans(t, 1)[0]
		x.mapsEmpty(t)
		if s.Status().Code != codes.Error || !strings.Contains(s.Status().Description, lost.Reason) {
			t.Errorf("status %v %q, want Error naming %q", s.Status().Code, s.Status().Description, lost.Reason)
		}
		wantAttrs(t, "span", s.Attributes(), map[string]string{"dlock.lost.reason": lost.Reason, "dlock.outcome": "acquired"})
		ev := eventNames(s)
		if len(ev) < 2 || ev[0] != "acquired" || ev[len(ev)-1] != "lost" {
			t.Errorf("events %v, want acquired first and lost last", ev)
		}
		noSecret(t, s, lease)
	})
}

// TestContextWithLease: spans of the work under the lock are children of
// the lock's span; once the lease ended the context is left unchanged.
func TestContextWithLease(t *testing.T) {
	backends(t, func(t *testing.T, url string) {
		x := newTraced(t, url)
		ctx, caller := x.caller(t.Context())
		defer caller.End()
		lease, err := x.l.Acquire(ctx, "work")
		if err != nil {
			t.Fatal(err)
		}
		wctx := ContextWithLease(lease.Context(ctx), lease)
		_, work := x.tp.Tracer("app").Start(wctx, "work")
		work.End()
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
		lock := x.lockSpans(t, 1)[0]
		if got, want := work.(interface{ Parent() trace.SpanContext }).Parent().SpanID(), lock.SpanContext().SpanID(); got != want {
			t.Errorf("work span's parent %v, want the lock span %v", got, want)
		}
		if got := trace.SpanFromContext(ContextWithLease(ctx, lease)).SpanContext(); got.SpanID() != caller.SpanContext().SpanID() {
			t.Errorf("ContextWithLease of an ended lease set span %v, want ctx's own %v", got.SpanID(), caller.SpanContext().SpanID())
		}
		if ContextWithLease(ctx, nil) != ctx {
			t.Error("ContextWithLease(ctx, nil) changed ctx")
		}
	})
}

// TestNotGrantedOutcomes: a canceled wait ends the span with outcome
// canceled and no error; a refused call (the name is held as another
// kind) with outcome error and status Error.
func TestNotGrantedOutcomes(t *testing.T) {
	x := newTraced(t, "mem://otel-outcomes")
	lease, err := x.l.Acquire(t.Context(), "taken")
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(context.Background())
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	time.AfterFunc(20*time.Millisecond, cancel)
	if _, err := x.l.Acquire(ctx, "taken", dlock.WithWait(time.Minute)); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled Acquire: %v, want context.Canceled", err)
	}
	sem, err := x.l.Semaphore("taken", 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sem.TryAcquire(t.Context()); !errors.Is(err, dlock.ErrKindMismatch) {
		t.Fatalf("semaphore on a mutex's name: %v, want ErrKindMismatch", err)
	}
	spans := x.lockSpans(t, 2)
	canceled, refused := spans[0], spans[1]
	wantAttrs(t, "canceled", canceled.Attributes(), map[string]string{"dlock.outcome": "canceled"})
	if canceled.Status().Code != codes.Unset {
		t.Errorf("canceled: status %v, want Unset", canceled.Status().Code)
	}
	wantAttrs(t, "refused", refused.Attributes(), map[string]string{"dlock.outcome": "error", "dlock.kind": "permit"})
	if refused.Status().Code != codes.Error || refused.Name() != "dlock.lock permit" {
		t.Errorf("refused: %s status %v, want dlock.lock permit, Error", refused.Name(), refused.Status().Code)
	}
}

// TestInstrumentErrors: bad arguments are errors naming them, not panics.
func TestInstrumentErrors(t *testing.T) {
	l, err := dlock.Open(t.Context(), "mem://otel-errors")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"nil locker", Instrument(nil), "Instrument(nil)"},
		{"nil provider", Instrument(l, WithTracerProvider(nil)), "WithTracerProvider(nil)"},
		{"nil option", Instrument(l, nil), "nil Option"},
		{"metrics nil locker", InstrumentMetrics(nil), "InstrumentMetrics(nil)"},
		{"nil meter provider", InstrumentMetrics(l, WithMeterProvider(nil)), "WithMeterProvider(nil)"},
	} {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("%s: error %v, want one naming %s", c.name, c.err, c.want)
		}
	}
}

// TestPrimitiveSpans: a semaphore's permit and an election's term are
// spans of their kind, and an election's unbounded wait is wait_ms -1.
func TestPrimitiveSpans(t *testing.T) {
	x := newTraced(t, "mem://otel-primitives")
	sem, err := x.l.Semaphore("pool", 3)
	if err != nil {
		t.Fatal(err)
	}
	permit, err := sem.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	el, err := x.l.Election("leader")
	if err != nil {
		t.Fatal(err)
	}
	term, err := el.Campaign(t.Context(), "me")
	if err != nil {
		t.Fatal(err)
	}
	if err := dlock.ReleaseAll(t.Context(), []*dlock.Lease{permit, term}); err != nil {
		t.Fatal(err)
	}
	spans := x.lockSpans(t, 2)
	byName := map[string]map[string]string{}
	for _, s := range spans {
		byName[s.Name()] = attrs(s.Attributes())
	}
	if a := byName["dlock.lock permit"]; a["dlock.name"] != "pool" || a["dlock.fence"] != strconv.FormatUint(permit.Fence(), 10) {
		t.Errorf("permit span: %v", a)
	}
	if a := byName["dlock.lock leader"]; a["dlock.name"] != "leader" || a["dlock.wait_ms"] != "-1" || a["dlock.kind"] != "leader" {
		t.Errorf("leader span: %v", a)
	}
}

// TestInstrumentTwice: a second Instrument adds a second span per lock,
// nested in the first; each ends its own, ContextWithLease gives the
// outer one, and neither leaves a lease behind in the maps.
func TestInstrumentTwice(t *testing.T) {
	x := newTraced(t, "mem://otel-twice")
	inner, err := instrument(x.l, []Option{WithTracerProvider(x.tp)})
	if err != nil {
		t.Fatal(err)
	}
	lease, err := x.l.Acquire(t.Context(), "twice")
	if err != nil {
		t.Fatal(err)
	}
	_, work := x.tp.Tracer("app").Start(ContextWithLease(t.Context(), lease), "work")
	work.End()
	if err := lease.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := count(&inner.spans); n != 0 {
		t.Errorf("the second instrumentation holds %d leases after release", n)
	}
	spans := x.lockSpans(t, 2)
	out, in := spans[0], spans[1] // hooks run in the order added: the outer span ends first
	if in.Parent().SpanID() != out.SpanContext().SpanID() {
		t.Errorf("second span's parent %v, want the first's %v", in.Parent().SpanID(), out.SpanContext().SpanID())
	}
	for _, s := range spans {
		if got := strings.Join(eventNames(s), ","); got != "acquired,released" {
			t.Errorf("%s events %s, want acquired,released", s.SpanContext().SpanID(), got)
		}
	}
	if got := work.(interface{ Parent() trace.SpanContext }).Parent().SpanID(); got != out.SpanContext().SpanID() {
		t.Errorf("work's parent %v, want the outer lock span %v", got, out.SpanContext().SpanID())
	}
}
