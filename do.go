package dlock

import (
	"context"
	"errors"
	"slices"
	"time"
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

// AcquireAll takes several locks, all or nothing. Names are sorted and
// deduplicated first, so every caller takes them in the same order and two
// callers asking for {a, b} and {b, a} can never deadlock. The wait bound
// (WithWait) covers the whole set. On failure every lock already taken is
// released and the error names the lock that could not be had. The leases
// are returned in sorted name order.
func (l *Locker) AcquireAll(ctx context.Context, names []string, opts ...Option) ([]*Lease, error) {
	if err := l.usable(); err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, invalid("AcquireAll needs at least one name")
	}
	sorted := slices.Clone(names)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	s := l.defaults
	for _, n := range sorted {
		var err error
		if s, err = l.settingsFor(n, opts); err != nil {
			return nil, err
		}
	}
	start := time.Now()
	leases := make([]*Lease, 0, len(sorted))
	for _, n := range sorted {
		step := s
		if s.wait != Forever && s.wait != 0 {
			step.wait = max(s.wait-time.Since(start), 0)
		}
		tctx, t := l.traceAcquire(ctx, n, KindMutex, step)
		ls, err := t.done(l.acquire(tctx, n, step))
		if err != nil {
			ReleaseAll(context.WithoutCancel(ctx), leases)
			return nil, err
		}
		leases = append(leases, ls)
	}
	return leases, nil
}
