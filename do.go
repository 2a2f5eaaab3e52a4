package dlock

import (
	"context"
	"errors"
)

// Do acquires the named lock (waiting as Acquire does), runs fn with a
// context that is canceled the moment the lease is lost, and always
// releases. It returns fn's error; when fn succeeded it returns the lock's
// error instead: not acquired, lost while fn ran (fn's work may then have
// overlapped another holder's: fence your writes), or a failed release.
func Do(ctx context.Context, l *Locker, name string, fn func(ctx context.Context, lease *Lease) error, opts ...Option) error {
	if fn == nil {
		return invalid("nil function given to Do")
	}
	lease, err := l.Acquire(ctx, name, opts...)
	if err != nil {
		return err
	}
	done := false
	defer func() {
		if !done { // fn panicked: free the lock before the panic goes on
			_ = lease.Release(ctx)
		}
	}()
	fnErr := fn(lease.Context(ctx), lease)
	done = true
	lostErr := lease.Err()
	relErr := lease.Release(ctx)
	switch {
	case errors.Is(lostErr, ErrLost):
		return errors.Join(fnErr, lostErr)
	case fnErr != nil:
		return fnErr
	}
	return relErr
}
