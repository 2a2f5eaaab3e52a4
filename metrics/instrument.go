package metrics

import (
	"fmt"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/fence"
	"github.com/prometheus/client_golang/prometheus"
)

// Instrument registers dlock's metrics on reg and adds dlock.Hooks to l
// that update them, for the calls l starts from then on. It also counts
// the fence guards' rejections (see InstrumentFences).
//
// The collectors are registered once per registry: Instrument with
// another Locker and the same reg shares them (a Locker's series carry its
// Backend as the backend label), and the first call's options decide the
// buckets. Instrument each Locker once per registry; a second call counts
// its events twice.
//
// A nil l or reg, or an invalid option, is an error matching
// dlock.ErrInvalidArgument; so is a registry that holds a different
// collector under one of the names. Nothing is registered or hooked then.
func Instrument(l *dlock.Locker, reg prometheus.Registerer, opts ...Option) error {
	if l == nil {
		return fmt.Errorf("%w: metrics.Instrument: nil *dlock.Locker", dlock.ErrInvalidArgument)
	}
	if err := checkRegisterer("Instrument", reg); err != nil {
		return err
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return err
	}
	c := newCollectors(cfg)
	r := &registrar{reg: reg}
	c.takeAll(r)
	fc := newFenceCounter()
	fresh := take(r, &fc)
	if err := r.done(); err != nil {
		return err
	}
	if fresh {
		countRejections(fc)
	}
	l.AddHooks(c.forBackend(l.Backend()).hooks())
	return nil
}

// InstrumentFences registers dlock_fence_rejected_total on reg and counts
// every stale write the process's fence guards refuse (fence.OnReject),
// by store: memory, postgres, redis, sqlite. Instrument does this too; use
// InstrumentFences in a service that guards a resource but holds no
// Locker. Calling it again with the same registry changes nothing.
func InstrumentFences(reg prometheus.Registerer) error {
	if err := checkRegisterer("InstrumentFences", reg); err != nil {
		return err
	}
	r := &registrar{reg: reg}
	fc := newFenceCounter()
	fresh := take(r, &fc)
	if err := r.done(); err != nil {
		return err
	}
	if fresh {
		countRejections(fc)
	}
	return nil
}

func checkRegisterer(fn string, reg prometheus.Registerer) error {
	if reg == nil {
		return fmt.Errorf("%w: metrics.%s: nil prometheus.Registerer (prometheus.DefaultRegisterer is the global one)", dlock.ErrInvalidArgument, fn)
	}
	return nil
}

// fenceStores are the stores of this module's guards; their series exist
// from the start, so that increase() sees the first rejection.
var fenceStores = []string{"memory", "mysql", "postgres", "redis", "sqlite"}

// countRejections counts rejections in fc for as long as the process
// runs: the counter lives as long as the registry it was registered on.
func countRejections(fc *prometheus.CounterVec) {
	for _, s := range fenceStores {
		fc.WithLabelValues(s)
	}
	fence.OnReject(func(store string) { fc.WithLabelValues(store).Inc() })
}
