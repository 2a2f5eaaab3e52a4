package dlock

import "errors"

// ErrDetached is the lease's Err after Detach: the lease was handed on,
// and this Locker no longer keeps or releases it.
var ErrDetached = errors.New("dlock: lease detached")

// Detach hands the lease on: it returns the lease's Handle and ends the
// lease here — Done closes, Err is ErrDetached, the watchdog stops
// refreshing it, and Release and Locker.Close leave it alone — without
// telling the backend, where the lock stays held until its TTL runs out.
// Whoever gets the handle resumes it (Locker.Resume) before then, and
// keeps it from there. A lease that has ended already cannot be handed
// on: Detach returns its Err (ErrReleased, a *LostError, ErrDetached).
//
// The handle is a secret: see Handle.
func (ls *Lease) Detach() (string, error) {
	h := ls.Handle()
	ls.mu.Lock()
	if ls.err != nil || ls.released {
		err := ls.err
		ls.mu.Unlock()
		if err == nil {
			err = ErrReleased // Release is under way
		}
		return "", err
	}
	ls.released = true // Release now returns ErrDetached untouched
	ls.mu.Unlock()
	ls.finish(ErrDetached)
	if err := ls.Err(); err != ErrDetached {
		return "", err // lost meanwhile: nothing to hand on
	}
	return h, nil
}
