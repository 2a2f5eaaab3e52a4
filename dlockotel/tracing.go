package dlockotel

import (
	"context"
	"errors"
	"sync"

	"github.com/dlockdev/dlock"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// scope is the instrumentation scope of the tracer and meter.
const scope = "github.com/dlockdev/dlock/dlockotel"

// Instrument makes l trace its locks: one span per acquire call, from the
// call to the end of the lease it returns. See the package doc for the
// span's name, attributes and events. It adds dlock.Hooks to l, so it
// traces the calls that start after it returns; call it once per Locker
// (each call adds a span per lock). It fails only on a nil Locker or a
// bad Option.
func Instrument(l *dlock.Locker, opts ...Option) error {
	_, err := instrument(l, opts)
	return err
}

func instrument(l *dlock.Locker, opts []Option) (*tracing, error) {
	if l == nil {
		return nil, errors.New("dlockotel: Instrument(nil): want a *dlock.Locker")
	}
	c, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	if c.tracerProvider == nil {
		c.tracerProvider = otel.GetTracerProvider()
	}
	t := &tracing{tracer: c.tracerProvider.Tracer(scope), attrs: c.attrs}
	l.AddHooks(dlock.Hooks{
		Acquiring:   t.acquiring,
		AcquireDone: t.acquireDone,
		Refreshed:   t.refreshed,
		Ended:       t.ended,
	})
	return t, nil
}

// tracing is one Instrument call's state.
type tracing struct {
	tracer trace.Tracer
	attrs  []attribute.KeyValue
	// spans holds the open span of every lease granted and not yet ended:
	// *dlock.Lease → *heldSpan. Ended deletes the entry.
	spans sync.Map
}

// heldSpan is the open span of a held lease. A pointer, so that the
// entries of leaseSpans can be compared (a span value may not be).
type heldSpan struct{ span trace.Span }

// spanKey is the context key under which acquiring hands its span to
// acquireDone; keyed by the Instrument call, so that a second
// instrumentation of the same Locker finds its own span.
type spanKey struct{ t *tracing }

// acquiring starts the span as a child of the caller's context.
func (t *tracing) acquiring(ctx context.Context, info dlock.AcquireInfo) context.Context {
	attrs := append(t.attrs[:len(t.attrs):len(t.attrs)],
		keyBackend.String(info.Backend), keyName.String(info.Name),
		keyKind.String(string(info.Kind)), keyWait.Int64(millis(info.Wait)))
	ctx, span := t.tracer.Start(ctx, "dlock.lock "+string(info.Kind),
		trace.WithTimestamp(info.Start), trace.WithAttributes(attrs...))
	return context.WithValue(ctx, spanKey{t}, span)
}

// acquireDone ends the span of a call that was not granted, and keeps a
// granted one open until the lease ends.
func (t *tracing) acquireDone(ctx context.Context, ev dlock.AcquireEvent) {
	span, ok := ctx.Value(spanKey{t}).(trace.Span)
	if !ok {
		return
	}
	span.SetAttributes(keyOutcome.String(ev.Outcome), keyWaited.Int64(ev.Waited.Milliseconds()))
	if ev.Lease == nil {
		if ev.Outcome == dlock.OutcomeError && ev.Err != nil {
			span.RecordError(ev.Err)
			span.SetStatus(codes.Error, ev.Err.Error())
		}
		span.End()
		return
	}
	span.SetAttributes(fence(ev.Lease))
	span.AddEvent("acquired", trace.WithAttributes(fence(ev.Lease), keyWaited.Int64(ev.Waited.Milliseconds())))
	h := &heldSpan{span}
	t.spans.Store(ev.Lease, h)
	leaseSpans.LoadOrStore(ev.Lease, h)
}

// refreshed notes a refresh on the lease's span.
func (t *tracing) refreshed(ev dlock.RefreshEvent) {
	v, ok := t.spans.Load(ev.Lease)
	if !ok {
		return
	}
	span := v.(*heldSpan).span
	if ev.Result == dlock.RefreshOK {
		span.AddEvent("refreshed")
		return
	}
	attrs := []attribute.KeyValue{keyRefresh.String(ev.Result)}
	if ev.Err != nil {
		attrs = append(attrs, keyErrMessage.String(ev.Err.Error()))
	}
	span.AddEvent("refresh failed", trace.WithAttributes(attrs...))
}

// ended ends the lease's span: released, or lost (status Error).
func (t *tracing) ended(ev dlock.EndEvent) {
	v, ok := t.spans.LoadAndDelete(ev.Lease)
	if !ok {
		return
	}
	leaseSpans.CompareAndDelete(ev.Lease, v)
	span := v.(*heldSpan).span
	held := keyHeld.Int64(ev.Held.Milliseconds())
	if ev.Reason == dlock.EndReleased || ev.Reason == dlock.EndDetached {
		span.AddEvent(ev.Reason, trace.WithAttributes(held))
		span.End()
		return
	}
	span.SetAttributes(keyLostReason.String(ev.Reason))
	span.AddEvent("lost", trace.WithAttributes(keyLostReason.String(ev.Reason), held))
	msg := "dlock: lease lost: " + ev.Reason
	if ev.Err != nil {
		msg = ev.Err.Error()
	}
	span.SetStatus(codes.Error, msg)
	span.End()
}
