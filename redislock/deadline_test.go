package redislock

import (
	"testing"
	"time"

	"github.com/dlockdev/dlock/driver"
)

// TestBoundedReusesWorkers: on a client without ContextTimeoutEnabled,
// calls under a deadline run on a worker goroutine; one call after
// another reuses the same worker instead of starting a goroutine per call
// (whose stack growth through go-redis's call path was a large share of
// an uncontended cycle's client CPU), and the calls still work.
func TestBoundedReusesWorkers(t *testing.T) {
	d := testDriver(t, singleClient(t)) // ContextTimeoutEnabled off
	if d.honours {
		t.Fatal("the client honours deadlines: bounded would not use its workers")
	}
	ctx := testCtx(t)
	before := d.workers.started.Load()
	const cycles = 200
	for i := range cycles {
		req := driver.Request{Name: "workers", Token: "tok", Owner: "o", TTL: time.Minute}
		g, err := d.TryAcquire(ctx, req)
		if err != nil || !g.Acquired {
			t.Fatalf("call %d: TryAcquire = %+v, %v", i, g, err)
		}
		if err := d.Release(ctx, "workers", "tok"); err != nil {
			t.Fatalf("call %d: Release: %v", i, err)
		}
	}
	// A worker may exit between two calls when the machine stalls for
	// workerIdle; far fewer than one per call must start.
	if n := d.workers.started.Load() - before; n > cycles/10 {
		t.Errorf("%d workers started for %d calls, want a few (reuse)", n, 2*cycles)
	}
	// Idle workers exit (goleak, in TestMain, checks that none is left).
	time.Sleep(2 * workerIdle)
}
