package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http/httptest"
	"strings"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/fence"
	_ "github.com/dlockdev/dlock/memlock"
	"github.com/dlockdev/dlock/metrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Instrument a Locker, take a lock, meet it held once, release it, and
// read the counts from the /metrics handler.
func ExampleInstrument() {
	ctx := context.Background()
	locker, err := dlock.Open(ctx, "mem://example-instrument")
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	reg := prometheus.NewRegistry()
	if err := metrics.Instrument(locker, reg); err != nil {
		log.Fatal(err)
	}

	lease, err := locker.Acquire(ctx, "reports/daily")
	if err != nil {
		log.Fatal(err)
	}
	if _, err := locker.TryAcquire(ctx, "reports/daily"); errors.Is(err, dlock.ErrNotAcquired) {
		fmt.Println("second try: held")
	}
	if err := lease.Release(ctx); err != nil {
		log.Fatal(err)
	}

	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for line := range strings.Lines(rec.Body.String()) {
		for _, p := range []string{"dlock_acquire_wait_seconds_count", "dlock_hold_seconds_count", "dlock_held", "dlock_waiters"} {
			if strings.HasPrefix(line, p) {
				fmt.Print(line)
			}
		}
	}
	// Output:
	// second try: held
	// dlock_acquire_wait_seconds_count{backend="mem",outcome="acquired"} 1
	// dlock_acquire_wait_seconds_count{backend="mem",outcome="held"} 1
	// dlock_held{backend="mem"} 0
	// dlock_hold_seconds_count{backend="mem",reason="released"} 1
	// dlock_waiters{backend="mem"} 0
}

// Count the stale writes that fence guards refuse, in a process that
// guards a resource and holds no Locker.
func ExampleInstrumentFences() {
	reg := prometheus.NewRegistry()
	if err := metrics.InstrumentFences(reg); err != nil {
		log.Fatal(err)
	}
	var guard fence.Guard // or pgfence, redisfence, sqlitefence
	_ = guard.Admit("invoice/7", 8)
	if err := guard.Admit("invoice/7", 7); errors.Is(err, fence.ErrStale) {
		fmt.Println(err)
	}

	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for line := range strings.Lines(rec.Body.String()) {
		if strings.HasPrefix(line, `dlock_fence_rejected_total{store="memory"}`) {
			fmt.Print(line)
		}
	}
	// Output:
	// fence: write to "invoice/7" with fence 7 rejected: fence 8 has written since
	// dlock_fence_rejected_total{store="memory"} 1
}
