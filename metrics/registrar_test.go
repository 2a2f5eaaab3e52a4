package metrics

import (
	"context"
	"errors"
	"testing"

	"github.com/dlockdev/dlock"
	_ "github.com/dlockdev/dlock/memlock"
	"github.com/prometheus/client_golang/prometheus"
)

// TestRefusedInstrumentLeavesNothing: when a registry holds another
// collector under the last of dlock's names, Instrument fails and takes
// back the collectors it registered before: Unregister of an equal
// collector finds none left.
func TestRefusedInstrumentLeavesNothing(t *testing.T) {
	ctx := context.Background()
	l, err := dlock.Open(ctx, "mem://refused")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "dlock_renew_total", Help: "not ours"}))
	if err := Instrument(l, reg); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Fatalf("Instrument on a clashing registry: %v", err)
	}
	c := newCollectors(config{waitBuckets: defaultWaitBuckets, holdBuckets: defaultHoldBuckets})
	for _, x := range []prometheus.Collector{c.wait, c.hold, c.held, c.waiters, c.lost, newFenceCounter()} {
		if reg.Unregister(x) {
			t.Errorf("a refused Instrument left a %T registered", x)
		}
	}
}
