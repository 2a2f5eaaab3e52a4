package fence

import (
	"errors"
	"sync"
	"sync/atomic"
)

// rejectHooks are the functions OnReject registered, read without a lock
// on every rejection and replaced (copy on write) under mu.
// Process-wide because guards (Guard, pgfence, a user's own) are made with no handle a hook could be given through.
var rejectHooks struct {
	mu  sync.Mutex
	all atomic.Pointer[[]*rejectHook]
}

// rejectHook is one registration; its address identifies it for removal.
type rejectHook struct{ f func(store string) }

// OnReject calls f with the store's name each time a guard refuses a
// stale write, in every guard of the process: "memory" (Guard), "postgres"
// (pgfence), "redis" (redisfence), "sqlite" (sqlitefence) and "mysql"
// (mysqlfence). Package
// metrics counts rejections with it.
//
// A refused write is one the store did not perform because a newer grant
// had written: its error matches ErrStale. An invalid fence or key, a
// missing row or a failing store is not a rejection. A trigger's rejection
// (pgfence, sqlitefence, mysqlfence) is seen when it passes through the package's
// MapError, as the packages' own writes always do.
//
// f runs on the writer's goroutine, possibly while a guard holds its lock
// (Guard.Do), so it must be quick and must not call back into the guard.
// OnReject is safe for concurrent use. The returned remove unregisters f;
// calling it again does nothing. A nil f is ignored.
func OnReject(f func(store string)) (remove func()) {
	if f == nil {
		return func() {}
	}
	h := &rejectHook{f: f}
	updateRejectHooks(func(hs []*rejectHook) []*rejectHook { return append(hs, h) })
	var once sync.Once
	return func() {
		once.Do(func() { updateRejectHooks(func(hs []*rejectHook) []*rejectHook { return without(hs, h) }) })
	}
}

// updateRejectHooks replaces the registered hooks with edit's result.
func updateRejectHooks(edit func([]*rejectHook) []*rejectHook) {
	rejectHooks.mu.Lock()
	defer rejectHooks.mu.Unlock()
	var cur []*rejectHook
	if p := rejectHooks.all.Load(); p != nil {
		cur = *p
	}
	next := edit(append([]*rejectHook(nil), cur...))
	rejectHooks.all.Store(&next)
}

func without(hs []*rejectHook, h *rejectHook) []*rejectHook {
	out := hs[:0]
	for _, x := range hs {
		if x != h {
			out = append(out, x)
		}
	}
	return out
}

// Rejected is for guard implementations (this module's sub-packages, or a
// guard of your own): return a write's error through it. When err matches
// ErrStale it tells the OnReject hooks that store refused a write; it
// returns err unchanged, nil included. store names the kind of store, not
// the resource: a few fixed values, as they become metric labels.
func Rejected(store string, err error) error {
	if err != nil && errors.Is(err, ErrStale) {
		rejected(store)
	}
	return err
}

// rejected calls every hook registered with OnReject.
func rejected(store string) {
	p := rejectHooks.all.Load()
	if p == nil {
		return
	}
	for _, h := range *p {
		h.f(store)
	}
}
