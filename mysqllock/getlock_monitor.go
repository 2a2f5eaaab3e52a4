package mysqllock

import (
	"context"
	"database/sql/driver"
	"strings"
	"time"
)

// errBadConn makes database/sql discard a connection (sql.Conn.Raw).
var errBadConn = driver.ErrBadConn

// pin records token's session and starts the monitor with the first one.
func (d *getLocks) pin(token string, s *glSession) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.sessions[token] = s
	if d.stopMon == nil {
		ctx, cancel := context.WithCancel(context.Background())
		d.stopMon, d.monDone = cancel, make(chan struct{})
		go d.monitor(ctx, d.monDone)
	}
}

// unpin forgets token's session, and stops the monitor with the last one.
func (d *getLocks) unpin(token string) *glSession {
	d.mu.Lock()
	s := d.sessions[token]
	delete(d.sessions, token)
	last := len(d.sessions) == 0
	d.mu.Unlock()
	if last {
		d.stopMonitor()
	}
	return s
}

func (d *getLocks) stopMonitor() {
	d.mu.Lock()
	stop, done := d.stopMon, d.monDone
	if len(d.sessions) > 0 && stop != nil {
		d.mu.Unlock()
		return
	}
	d.stopMon, d.monDone = nil, nil
	d.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
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

// monitor checks the held locks every monitorEvery until ctx ends.
func (d *getLocks) monitor(ctx context.Context, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(monitorEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
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
		if (err == nil && ids[i] != s.connID) || (err != nil && ctx.Err() == nil && !d.alive(ctx, s)) {
			d.lose(s)
		}
	}
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
