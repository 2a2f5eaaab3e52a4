package redislock

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dlockdev/dlock/driver"
)

// TestBoundedReusesWorkers: on a client without ContextTimeoutEnabled,
// calls under a deadline run on a worker goroutine; one call after
// another reuses the same worker instead of starting a goroutine per call
// (whose stack growth through go-redis's call path was a large share of
// an uncontended cycle's client CPU), and the calls still work. A worker
// busy with a call that outlived its caller (a stalled server) holds up
// nobody: the next call gets a worker of its own and completes while the
// first is still stuck.
func TestBoundedReusesWorkers(t *testing.T) {
	d := testDriver(t, singleClient(t)) // ContextTimeoutEnabled off
	if d.honours {
		t.Fatal("the client honours deadlines: bounded would not use its workers")
	}
	ctx := testCtx(t)
	req := driver.Request{Name: "workers", Token: "tok", Owner: "o", TTL: time.Minute}
	cycle := func(what string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second) // not the test's minute
		defer cancel()
		g, err := d.TryAcquire(ctx, req)
		if err != nil || !g.Acquired {
			t.Fatalf("%s: TryAcquire = %+v, %v", what, g, err)
		}
		if err := d.Release(ctx, req.Name, req.Token); err != nil {
			t.Fatalf("%s: Release: %v", what, err)
		}
	}
	start := d.workers.started.Load()
	const cycles = 200
	for i := range cycles {
		cycle(fmt.Sprintf("call %d", i))
	}
	// A worker may exit between two calls when the machine stalls for
	// workerIdle; far fewer than one per call must start, and at least
	// one must (the calls ran on workers, not on the caller).
	if n := d.workers.started.Load() - start; n < 1 || n > cycles/10 {
		t.Errorf("%d workers started for %d calls, want 1 to %d (the calls run on workers, which are reused)", n, 2*cycles, cycles/10)
	}

	// One worker stuck in a call (its caller's deadline passed long
	// ago): the next call runs on another worker and completes (a pool
	// that queued it behind the stuck one would return only the
	// caller's deadline error). Two workers ran at once, so at least two
	// have started.
	stuck, unstick := make(chan struct{}), make(chan struct{})
	d.workers.run(func() { close(stuck); <-unstick })
	<-stuck
	cycle("a call while a worker is stuck")
	close(unstick)
	if n := d.workers.started.Load() - start; n < 2 {
		t.Errorf("%d workers started in all, yet a call completed while another was stuck: want at least 2", n)
	}
	// Idle workers exit (goleak, in TestMain, checks that none is left).
	time.Sleep(2 * workerIdle)
}
