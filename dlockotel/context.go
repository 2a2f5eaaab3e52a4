package dlockotel

import (
	"context"
	"sync"

	"github.com/dlockdev/dlock"
	"go.opentelemetry.io/otel/trace"
)

// leaseSpans maps every held, traced lease to its span (*dlock.Lease →
// *heldSpan), for ContextWithLease. When a Locker is instrumented twice,
// the first instrumentation's span (the outer one) is the lease's.
// Process-wide because ContextWithLease gets only the lease, and a *dlock.Lease carries no value a hook could attach.
var leaseSpans sync.Map

// ContextWithLease returns ctx with the span of lease's lock as its active
// span, so that the spans of the work done under the lock are its
// children:
//
//	ctx = dlockotel.ContextWithLease(lease.Context(ctx), lease)
//
// It returns ctx unchanged when lease is nil, was not acquired through an
// instrumented Locker, or has ended.
func ContextWithLease(ctx context.Context, lease *dlock.Lease) context.Context {
	if lease == nil {
		return ctx
	}
	v, ok := leaseSpans.Load(lease)
	if !ok {
		return ctx
	}
	return trace.ContextWithSpan(ctx, v.(*heldSpan).span)
}
