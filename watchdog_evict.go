package dlock

import (
	"context"

	"github.com/dlockdev/dlock/driver"
)

// watchEvictions subscribes, while the watchdog loop runs, to the
// force-releases the backend pushes (driver.EvictionWatcher) and ends
// every matching lease at once with LostForceReleased. It returns the
// function that ends the subscription and waits for it. Without the
// interface, or when subscribing fails, the next refresh remains the
// signal.
func (wd *watchdog) watchEvictions() (stop func()) {
	ew, ok := wd.drv.(driver.EvictionWatcher)
	if !ok {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		ch, unsubscribe, err := ew.WatchEvictions(ctx)
		if err != nil {
			return
		}
		defer unsubscribe()
		for {
			select {
			case <-ctx.Done():
				return
			case e, ok := <-ch:
				if !ok {
					return
				}
				wd.evict(e)
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// evict ends the live lease that e names, if this Locker holds it.
func (wd *watchdog) evict(e driver.Eviction) {
	wd.mu.Lock()
	var hit []*Lease
	for ls := range wd.sched {
		if ls.name == e.Name && ls.fence == e.Fence {
			hit = append(hit, ls)
		}
	}
	wd.mu.Unlock()
	for _, ls := range hit {
		ls.lose(LostForceReleased, nil)
	}
}
