package dlock

import (
	"context"
	"fmt"
	"time"

	"github.com/dlockdev/dlock/driver"
)

// granted turns a confirmed grant into a live lease.
func (l *Locker) granted(req driver.Request, g driver.Grant, sent time.Time, s settings) (*Lease, error) {
	ls := newLease(l, req, g, sent, s.autoRefresh)
	if !l.track(ls) {
		l.cleanup(req)
		return nil, invalid("Locker is closed")
	}
	if sw, ok := l.drv.(driver.SessionWatcher); ok {
		sw.WatchSession(req.Token, func() { ls.lose(LostSession, errSessionGone) })
	}
	if !s.autoRefresh && ls.window < ls.ttl {
		return l.confirm(ls)
	}
	return ls, nil
}

// confirm extends a provisional grant (driver.Grant.Window) to its TTL
// before the acquire returns, for a lease no watchdog will refresh: its
// holder was promised the TTL. A grant that can no longer be extended is
// released and reported as the backend error it is.
func (l *Locker) confirm(ls *Lease) (*Lease, error) {
	ctx, cancel := context.WithTimeout(context.Background(), ls.Expires().Sub(l.clock.Now()))
	defer cancel()
	if err := ls.Refresh(ctx, ls.ttl); err != nil {
		_ = ls.Release(context.Background())
		return nil, backend("acquire", ls.Name(), fmt.Errorf("confirming a hand-off: %w", err))
	}
	return ls, nil
}
