package dlockotel_test

import (
	"context"
	"fmt"
	"log"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/dlockotel"
	_ "github.com/dlockdev/dlock/memlock"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// Example traces a lock and the work done under it. docs/otel.md shows the
// same code as a program (TestDocMatchesExample keeps the two equal).
func Example() {
	// A service passes its own TracerProvider (with an OTLP exporter, say),
	// or none: the default is otel.GetTracerProvider(). This one records the
	// spans so that they can be printed below.
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))

	ctx := context.Background()
	locker, err := dlock.Open(ctx, "mem://otel-example")
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	if err := dlockotel.Instrument(locker, dlockotel.WithTracerProvider(tp)); err != nil {
		log.Fatal(err)
	}

	ctx, job := tp.Tracer("app").Start(ctx, "nightly-report")
	lease, err := locker.Acquire(ctx, "reports/nightly")
	if err != nil {
		log.Fatal(err)
	}
	// The work runs under the lease's context (canceled if the lease is
	// lost) with the lock's span as its parent.
	work := dlockotel.ContextWithLease(lease.Context(ctx), lease)
	_, render := tp.Tracer("app").Start(work, "render")
	render.End()
	if err := lease.Release(context.Background()); err != nil {
		log.Fatal(err)
	}
	job.End()

	names := map[string]string{}
	for _, s := range rec.Ended() {
		names[s.SpanContext().SpanID().String()] = s.Name()
	}
	for _, s := range rec.Ended() {
		var events []string
		for _, e := range s.Events() {
			events = append(events, e.Name)
		}
		fmt.Printf("%-16s parent %-16q events %v\n", s.Name(), names[s.Parent().SpanID().String()], events)
	}
	// Output:
	// render           parent "dlock.lock mutex" events []
	// dlock.lock mutex parent "nightly-report" events [acquired released]
	// nightly-report   parent ""               events []
}
