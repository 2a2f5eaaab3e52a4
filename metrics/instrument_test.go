package metrics_test

import (
	"context"
	"errors"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/fence"
	"github.com/dlockdev/dlock/metrics"
	"github.com/prometheus/client_golang/prometheus"
)

// TestSharedRegistry: two Lockers on one registry share its collectors
// (their counts add up), and instrumenting a second time does not hook
// the fence counter twice.
func TestSharedRegistry(t *testing.T) {
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	url := backends[0].server(t)
	a, b := instrumented(t, url, reg), instrumented(t, url, reg)
	if err := metrics.InstrumentFences(reg); err != nil {
		t.Fatal(err)
	}
	for _, l := range []*dlock.Locker{a, b} {
		ls, err := l.Acquire(ctx, "shared")
		if err != nil {
			t.Fatal(err)
		}
		want(t, reg, "dlock_held", labels{"backend": "mem"}, 1)
		if err := ls.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	want(t, reg, "dlock_acquire_wait_seconds", labels{"backend": "mem", "outcome": "acquired"}, 2)
	want(t, reg, "dlock_hold_seconds", labels{"backend": "mem", "reason": "released"}, 2)
	if n := count(t, reg, "dlock_held"); n != 1 {
		t.Fatalf("dlock_held has %d series, want 1 (backend=mem)", n)
	}

	var g fence.Guard
	if err := g.Admit("doc", 2); err != nil {
		t.Fatal(err)
	}
	if err := g.Admit("doc", 1); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("stale Admit: %v", err)
	}
	want(t, reg, "dlock_fence_rejected_total", labels{"store": "memory"}, 1)
}

// TestBadInput: nil arguments, bad buckets and a registry that holds
// another collector under a dlock name are errors naming the problem,
// and leave the registry as it was.
func TestBadInput(t *testing.T) {
	l := instrumented(t, backends[0].server(t))
	reg := prometheus.NewRegistry()
	clash := prometheus.NewGauge(prometheus.GaugeOpts{Name: "dlock_renew_total", Help: "not ours"})
	clashing := prometheus.NewRegistry()
	clashing.MustRegister(clash)
	for _, c := range []struct {
		name string
		err  error
		in   string
	}{
		{"nil Locker", metrics.Instrument(nil, reg), "nil *dlock.Locker"},
		{"nil Registerer", metrics.Instrument(l, nil), "nil prometheus.Registerer"},
		{"nil Registerer (fences)", metrics.InstrumentFences(nil), "nil prometheus.Registerer"},
		{"nil Option", metrics.Instrument(l, reg, nil), "nil Option"},
		{"no buckets", metrics.Instrument(l, reg, metrics.WithWaitBuckets()), "WithWaitBuckets: no bucket bounds"},
		{"decreasing", metrics.Instrument(l, reg, metrics.WithHoldBuckets(1, 0.5)), "bound 0.5 follows 1"},
		{"equal", metrics.Instrument(l, reg, metrics.WithHoldBuckets(1, 1)), "bound 1 follows 1"},
		{"NaN", metrics.Instrument(l, reg, metrics.WithWaitBuckets(math.NaN())), "bound NaN is not a positive"},
		{"negative", metrics.Instrument(l, reg, metrics.WithWaitBuckets(-1, 1)), "bound -1 is not a positive"},
		{"clash", metrics.Instrument(l, clashing), "dlock_renew_total"},
	} {
		if !errors.Is(c.err, dlock.ErrInvalidArgument) || !strings.Contains(c.err.Error(), c.in) {
			t.Errorf("%s: %v, want ErrInvalidArgument saying %q", c.name, c.err, c.in)
		}
	}
	if n := count(t, reg); n != 0 {
		t.Errorf("registry after refused calls: %d series, want none:\n%s", n, dump(t, reg))
	}
}

// TestBuckets: WithWaitBuckets and WithHoldBuckets set the bounds; the
// defaults are the ones docs/metrics.md and the doc comments list.
func TestBuckets(t *testing.T) {
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	l := instrumented(t, backends[0].server(t))
	if err := metrics.Instrument(l, reg, metrics.WithWaitBuckets(0.5, 2), metrics.WithHoldBuckets(7)); err != nil {
		t.Fatal(err)
	}
	ls, err := l.Acquire(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	ls.Release(ctx)
	got := bounds(t, reg)
	if got["dlock_acquire_wait_seconds"] != "0.5 2" || got["dlock_hold_seconds"] != "7" {
		t.Fatalf("bounds %v, want 0.5 2 and 7", got)
	}

	reg = prometheus.NewRegistry()
	if err := metrics.Instrument(l, reg); err != nil {
		t.Fatal(err)
	}
	if ls, err = l.Acquire(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	ls.Release(ctx)
	for _, file := range []string{"../docs/metrics.md", "doc.go", "options.go"} {
		doc, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		text := strings.Join(strings.Fields(strings.ReplaceAll(string(doc), "//", "")), " ")
		for name, b := range bounds(t, reg) {
			if !strings.Contains(text, b) {
				t.Errorf("%s does not list %s's default buckets %q", file, name, b)
			}
		}
	}
}

// bounds returns each histogram's bucket bounds, space-separated.
func bounds(t *testing.T, g prometheus.Gatherer) map[string]string {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if h := m.GetHistogram(); h != nil {
				var bs []string
				for _, b := range h.GetBucket() {
					bs = append(bs, strconvFloat(b.GetUpperBound()))
				}
				out[mf.GetName()] = strings.Join(bs, " ")
			}
		}
	}
	return out
}
