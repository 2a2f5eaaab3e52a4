package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	_ "github.com/dlockdev/dlock/memlock"
	"github.com/dlockdev/dlock/metrics"
	_ "github.com/dlockdev/dlock/redislock"
	"github.com/prometheus/client_golang/prometheus"
)

// memSeq makes each mem:// store private to one test.
var memSeq atomic.Int64

// backends are the real backends every scenario runs on: the in-process
// memory store and a redis-server started for the test.
var backends = []struct {
	name   string
	server func(t *testing.T) string // starts the backend; returns its URL
}{
	{"mem", func(t *testing.T) string { return fmt.Sprintf("mem://metrics-%d", memSeq.Add(1)) }},
	{"redis", func(t *testing.T) string { return testserver.Redis(t).URL() }},
}

// scenario is one behaviour, run against a Locker instrumented on reg;
// each uses its own lock names, listed in lockNames.
type scenario struct {
	name string
	run  func(t *testing.T, l *dlock.Locker, reg *prometheus.Registry)
}

var scenarios = []scenario{
	{"HeldAndReleased", heldAndReleased},
	{"Lost", lost},
	{"Renewed", renewed},
	{"Waiters", waiters},
}

// lockNames are every lock name the scenarios use; no label may carry one.
var lockNames = []string{"lockname-alpha", "lockname-lost", "lockname-renewed", "lockname-waited"}

// instrumented opens url and instruments the Locker on every registry.
func instrumented(t *testing.T, url string, regs ...*prometheus.Registry) *dlock.Locker {
	t.Helper()
	l, err := dlock.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	for _, reg := range regs {
		if err := metrics.Instrument(l, reg); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

// TestScenarios runs every scenario on every backend, each with a fresh
// registry so that the counts are exact.
func TestScenarios(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			url := b.server(t)
			for _, s := range scenarios {
				t.Run(s.name, func(t *testing.T) {
					reg := prometheus.NewRegistry()
					s.run(t, instrumented(t, url, reg), reg)
				})
			}
		})
	}
}

// heldAndReleased: a grant, a TryAcquire that meets the held lock, and a
// release: the wait histogram sees acquired and held, the hold histogram
// sees released, and dlock_held goes 0, 1, 0.
func heldAndReleased(t *testing.T, l *dlock.Locker, reg *prometheus.Registry) {
	ctx := context.Background()
	b := l.Backend()
	want(t, reg, "dlock_held", labels{"backend": b}, 0)
	ls, err := l.Acquire(ctx, "lockname-alpha")
	if err != nil {
		t.Fatal(err)
	}
	want(t, reg, "dlock_held", labels{"backend": b}, 1)
	want(t, reg, "dlock_acquire_wait_seconds", labels{"backend": b, "outcome": dlock.OutcomeAcquired}, 1)
	if _, err := l.TryAcquire(ctx, "lockname-alpha"); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryAcquire of a held lock: %v, want ErrNotAcquired", err)
	}
	want(t, reg, "dlock_acquire_wait_seconds", labels{"backend": b, "outcome": dlock.OutcomeHeld}, 1)
	want(t, reg, "dlock_held", labels{"backend": b}, 1)
	time.Sleep(20 * time.Millisecond)
	if err := ls.Release(ctx); err != nil {
		t.Fatal(err)
	}
	want(t, reg, "dlock_held", labels{"backend": b}, 0)
	want(t, reg, "dlock_hold_seconds", labels{"backend": b, "reason": dlock.EndReleased}, 1)
	if s := holdSum(t, reg, b, dlock.EndReleased); s < 0.02 {
		t.Errorf("dlock_hold_seconds_sum = %v after holding 20ms", s)
	}
	if n := sum(t, reg, "dlock_lost_total"); n != 0 {
		t.Errorf("dlock_lost_total = %v after a release", n)
	}
}

// holdSum is dlock_hold_seconds_sum{backend, reason}.
func holdSum(t *testing.T, g prometheus.Gatherer, backend, reason string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if mf.GetName() == "dlock_hold_seconds" && label(m.GetLabel(), "backend") == backend && label(m.GetLabel(), "reason") == reason {
				return m.GetHistogram().GetSampleSum()
			}
		}
	}
	return -1
}

// labelPair is what client_model's LabelPair offers.
type labelPair interface {
	GetName() string
	GetValue() string
}

func label[P labelPair](ps []P, name string) string {
	for _, p := range ps {
		if p.GetName() == name {
			return p.GetValue()
		}
	}
	return ""
}

// lost: a force-released lease ends lost; dlock_lost_total counts its
// reason once, the hold histogram sees that reason, and dlock_held is 0.
func lost(t *testing.T, l *dlock.Locker, reg *prometheus.Registry) {
	ctx := context.Background()
	b := l.Backend()
	ls, err := l.Acquire(ctx, "lockname-lost", dlock.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := l.ForceRelease(ctx, "lockname-lost"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ls.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("lease not lost 10s after ForceRelease")
	}
	var le *dlock.LostError
	if !errors.As(ls.Err(), &le) {
		t.Fatalf("lease Err = %v, want a *LostError", ls.Err())
	}
	eventually(t, reg, "dlock_lost_total", labels{"backend": b, "reason": le.Reason}, 1)
	want(t, reg, "dlock_hold_seconds", labels{"backend": b, "reason": le.Reason}, 1)
	want(t, reg, "dlock_held", labels{"backend": b}, 0)
	if n := sum(t, reg, "dlock_lost_total"); n != 1 {
		t.Fatalf("dlock_lost_total adds up to %v, want 1\n%s", n, dump(t, reg))
	}
	if err := ls.Release(ctx); !errors.Is(err, dlock.ErrLost) {
		t.Fatalf("Release of a lost lease: %v", err)
	}
	want(t, reg, "dlock_held", labels{"backend": b}, 0)
}

// renewed: Lease.Refresh counts one ok renewal (the watchdog is off, so it
// adds none).
func renewed(t *testing.T, l *dlock.Locker, reg *prometheus.Registry) {
	ctx := context.Background()
	b := l.Backend()
	ls, err := l.Acquire(ctx, "lockname-renewed", dlock.WithTTL(time.Minute), dlock.WithAutoRefresh(false))
	if err != nil {
		t.Fatal(err)
	}
	defer ls.Release(ctx)
	want(t, reg, "dlock_renew_total", labels{"backend": b, "result": dlock.RefreshOK}, 0)
	if err := ls.Refresh(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	want(t, reg, "dlock_renew_total", labels{"backend": b, "result": dlock.RefreshOK}, 1)
	if err := ls.Refresh(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	want(t, reg, "dlock_renew_total", labels{"backend": b, "result": dlock.RefreshOK}, 2)
	want(t, reg, "dlock_renew_total", labels{"backend": b, "result": dlock.RefreshLost}, 0)
}

// waiters: while two goroutines wait on a held lock dlock_waiters is 2;
// one is canceled (outcome canceled), the other is granted on release.
func waiters(t *testing.T, l *dlock.Locker, reg *prometheus.Registry) {
	ctx := context.Background()
	b := l.Backend()
	holder, err := l.Acquire(ctx, "lockname-waited")
	if err != nil {
		t.Fatal(err)
	}
	want(t, reg, "dlock_waiters", labels{"backend": b}, 0)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	canceled := make(chan error, 1)
	go func() {
		_, err := l.Acquire(cctx, "lockname-waited", dlock.WithWait(time.Minute))
		canceled <- err
	}()
	granted := make(chan *dlock.Lease, 1)
	go func() {
		ls, err := l.Acquire(ctx, "lockname-waited", dlock.WithWait(time.Minute))
		if err != nil {
			t.Error(err)
		}
		granted <- ls
	}()
	eventually(t, reg, "dlock_waiters", labels{"backend": b}, 2)
	cancel()
	if err := <-canceled; !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled waiter: %v", err)
	}
	want(t, reg, "dlock_waiters", labels{"backend": b}, 1)
	want(t, reg, "dlock_acquire_wait_seconds", labels{"backend": b, "outcome": dlock.OutcomeCanceled}, 1)
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	ls := <-granted
	if ls == nil {
		t.FailNow()
	}
	want(t, reg, "dlock_waiters", labels{"backend": b}, 0)
	want(t, reg, "dlock_acquire_wait_seconds", labels{"backend": b, "outcome": dlock.OutcomeAcquired}, 2)
	want(t, reg, "dlock_held", labels{"backend": b}, 1)
	if err := ls.Release(ctx); err != nil {
		t.Fatal(err)
	}
	want(t, reg, "dlock_held", labels{"backend": b}, 0)
}

// TestNoLockNameLabel runs every scenario with its Locker instrumented on
// its own registry (for the scenario's exact counts) and on one shared per
// backend, then checks every series of the shared one: only the documented label names, and no label
// value holding a lock name (a label per name grows without bound).
func TestNoLockNameLabel(t *testing.T) {
	allowed := map[string]bool{"backend": true, "outcome": true, "reason": true, "result": true, "store": true}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			url := b.server(t)
			reg := prometheus.NewRegistry()
			for _, s := range scenarios {
				own := prometheus.NewRegistry()
				s.run(t, instrumented(t, url, own, reg), own)
			}
			all := allSeries(t, reg)
			if len(all) < 10 {
				t.Fatalf("only %d series after every scenario:\n%s", len(all), dump(t, reg))
			}
			for _, s := range all {
				for k, v := range s.labels {
					if !allowed[k] {
						t.Errorf("%s has label %s=%q; allowed: backend, outcome, reason, result, store", s.name, k, v)
					}
					for _, n := range lockNames {
						if strings.Contains(v, n) {
							t.Errorf("%s has label %s=%q: a lock name", s.name, k, v)
						}
					}
				}
			}
		})
	}
}
