package mysqllock

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"slices"
	"strings"
	"time"
)

// errBadConn makes database/sql discard a connection (sql.Conn.Raw).
var errBadConn = driver.ErrBadConn

// pin records token's session and starts the monitor, unless it runs.
func (d *getLocks) pin(token string, s *glSession) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.sessions[token] = s
	if d.stopMon == nil {
		ctx, cancel := context.WithCancel(context.Background())
		d.stopMon = cancel
		d.monitors.Add(1)
		go d.monitor(ctx)
	}
}

// unpin forgets token's session. The monitor stops at its next tick
// when no session is left (monitorIdle): a Locker that takes and
// releases locks back to back does not start and stop a goroutine each
// time.
func (d *getLocks) unpin(token string) *glSession {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.sessions[token]
	delete(d.sessions, token)
	return s
}

// monitorIdle reports, at a tick, whether the monitor ends: no session
// is left, and the next pin starts another.
func (d *getLocks) monitorIdle() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.sessions) > 0 {
		return false
	}
	if d.stopMon != nil {
		d.stopMon()
		d.stopMon = nil
	}
	return true
}

// stopMonitor stops the monitor and waits until every monitor started
// has returned.
func (d *getLocks) stopMonitor() {
	d.mu.Lock()
	if d.stopMon != nil {
		d.stopMon()
		d.stopMon = nil
	}
	d.mu.Unlock()
	d.monitors.Wait()
}

// WatchSession (driver.SessionWatcher) calls lost, once, when the
// monitor finds token's lock no longer held by its connection.
func (d *getLocks) WatchSession(token string, lost func()) bool {
	s := d.session(token)
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return false
	}
	s.lost = lost
	return true
}

// monitor checks the held locks every monitorEvery until ctx ends or a
// tick finds none.
func (d *getLocks) monitor(ctx context.Context) {
	defer d.monitors.Done()
	t := time.NewTicker(monitorEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if d.monitorIdle() {
				return
			}
			d.check(ctx)
			d.sweepRows(ctx)
		}
	}
}

// check asks, in one statement, which connection holds each held key,
// and ends the sessions whose connection no longer does. When the check
// itself fails (the server is down, or the monitor's connection broke),
// each session checks its own connection.
func (d *getLocks) check(ctx context.Context) {
	d.mu.Lock()
	var ss []*glSession
	for _, s := range d.sessions {
		ss = append(ss, s)
	}
	d.mu.Unlock()
	if len(ss) == 0 {
		return
	}
	ss = slices.DeleteFunc(ss, func(s *glSession) bool { return !d.learnID(ctx, s) })
	if len(ss) == 0 {
		return
	}
	args := make([]any, len(ss))
	cols := make([]string, len(ss))
	for i, s := range ss {
		args[i], cols[i] = s.key, "IFNULL(IS_USED_LOCK(?), 0)"
	}
	ids := make([]uint64, len(ss))
	dest := make([]any, len(ss))
	for i := range ids {
		dest[i] = &ids[i]
	}
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err := d.db.QueryRowContext(qctx, "SELECT "+strings.Join(cols, ", "), args...).Scan(dest...)
	for i, s := range ss {
		if (err == nil && ids[i] != s.connID.Load()) || (err != nil && ctx.Err() == nil && !d.alive(ctx, s)) {
			d.lose(s)
		}
	}
}

// learnID asks a session granted without learning its connection's id
// (glTryOne) for it, on its own connection, with whether that connection
// holds the key; a connection that does not, or does not answer, has
// lost the lock. It reports whether the session is to be checked.
func (d *getLocks) learnID(ctx context.Context, s *glSession) bool {
	if s.connID.Load() != 0 {
		return true
	}
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return false
	}
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var (
		id   uint64
		mine sql.NullBool
	)
	err := s.conn.QueryRowContext(qctx, glWhoAmI, s.key).Scan(&id, &mine)
	s.mu.Unlock()
	switch {
	case err == nil && mine.Bool:
		s.connID.Store(id)
		return true
	case err != nil && ctx.Err() != nil:
		return false // the monitor is stopping
	}
	d.lose(s)
	return false
}

// alive pings a session's own connection.
func (d *getLocks) alive(ctx context.Context, s *glSession) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return true // released meanwhile
	}
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return s.conn.PingContext(pctx) == nil
}

// lose ends a session whose connection lost its lock and tells the
// portable layer.
func (d *getLocks) lose(s *glSession) {
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return
	}
	s.ended = true
	lost := s.lost
	_ = s.conn.Raw(func(any) error { return errBadConn })
	_ = s.conn.Close()
	s.mu.Unlock()
	if lost != nil {
		go lost()
	}
}
