package mysqllock

import (
	"context"
	"database/sql"
	"math"
	"time"

	"github.com/dlockdev/dlock/driver"
)

// Lease mode's waiting (driver.Queuer): in the server, in GET_LOCK on the
// name's wake key (lease_wake.go), first come first served.

// headPoll bounds the sleep of the waiter that holds the wake key while
// a lease without a key holds the row (its release wakes nobody),
// watchEvery the time between a queued waiter's checks of the row, and
// busyPause the pause before a queued turn that found the row busy
// queues again.
const (
	headPoll   = 250 * time.Millisecond
	watchEvery = time.Second
	busyPause  = time.Millisecond
)

// AcquireWait (driver.Queuer) makes one attempt, and when it loses waits
// for the name's wake key in the server, behind the waiters that came
// before: a release frees the key, the server gives it to the first
// waiter at once, and that waiter takes the row, keeping the key (on the
// connection it waited on, pinned from then on) until its own release.
// The server wait is bounded by ctx's deadline, so a waiter stopped past
// it never gets the key; one that dies leaves the queue with its
// connection. While it waits, each waiter checks the row every
// watchEvery (sooner when the holder's TTL runs out first): a row free
// or expired for handoffGrace while someone else keeps the key (a
// stopped or cut-off process) makes it leave the queue and take the row
// without the key. Grant.Since is the sent time of the winning attempt.
//
// A name this driver's waits found held within contendedFor is queued
// for at once, without the first attempt (lease_queue.go), where the
// queued turn is one message: its first read names the holder.
func (d *leases) AcquireWait(ctx context.Context, req driver.Request) (driver.Grant, error) {
	last := driver.Holder{TTL: -1} // not seen yet
	if !d.queueMsgOK() || !d.recent.Lately(req.Name) {
		sent := time.Now()
		g, err := d.TryAcquire(ctx, req)
		if err != nil || g.Acquired {
			g.Since = sent
			return g, err
		}
		d.recent.Saw(req.Name)
		last = g.Holder
	}
	for {
		g, stale, err := d.queueTurn(ctx, req, last)
		if g.Holder.Name != "" {
			last = g.Holder
		}
		switch {
		case err != nil && ctx.Err() != nil:
			return driver.Grant{Holder: named(last)}, ctx.Err()
		case err != nil || g.Acquired:
			return g, err
		case stale:
			sent := time.Now()
			if g, err = d.grantOn(ctx, nil, req); err != nil || g.Acquired {
				g.Since = sent
				return g, err
			}
			if g.Holder.Name != "" {
				last = g.Holder
			}
		}
	}
}

// named is h, or no holder when none was seen.
func named(h driver.Holder) driver.Holder {
	if h.Name == "" {
		return driver.Holder{}
	}
	return h
}

// queueTurn waits once for the wake key on a connection of its own and,
// given it, takes the row (headTurn): in one message where the server
// allows it (queueMsg), else the wait and then the grant. stale is true
// when the watch of the row ended the wait: the row has been free for
// handoffGrace while another process kept the key. The Grant's Holder
// is the last holder seen, if any.
func (d *leases) queueTurn(ctx context.Context, req driver.Request, last driver.Holder) (g driver.Grant, stale bool, err error) {
	conn, err := d.db.Conn(ctx)
	if err != nil {
		return driver.Grant{}, false, d.classify(err)
	}
	key := d.wakeKey(req.Name)
	wctx, cancel := context.WithCancel(ctx)
	watched := make(chan watched, 1)
	seen := last
	go func() { watched <- d.watchRow(wctx, req, seen, cancel) }()
	sent := time.Now()
	var t queuedTook
	if d.queueMsgOK() {
		t, err = d.queueMsg(wctx, conn, req, key)
	} else {
		var got sql.NullInt64
		err = conn.QueryRowContext(wctx, wakeTake, key, serverWait(ctx)).Scan(&got)
		t.got = got.Int64 == 1
	}
	cancel()
	if h, ok := heldBy(req.Name, req.Token, t.before); ok {
		last = h
		d.recent.Saw(req.Name)
	}
	w := <-watched
	if w.answered {
		last = w.seen
	}
	switch {
	case err == nil && t.granted:
		if t.got {
			d.keys.keep(req.Token, key, conn)
		} else {
			_ = conn.Close() // granted without the key: conn holds none
		}
		return driver.Grant{Acquired: true, Fence: t.row.fence, Since: sent.Add(max(t.waited, 0)), Window: t.window}, false, nil
	case err == nil && t.got:
		return d.headTurn(ctx, req, key, conn)
	case err == nil: // the server's timeout: the caller's deadline
		discard(conn)
		if h, ok := heldBy(req.Name, req.Token, t.row); ok {
			last = h
		}
		return driver.Grant{Holder: named(last)}, false, context.DeadlineExceeded
	}
	discard(conn)
	switch {
	case w.stale && ctx.Err() == nil:
		return driver.Grant{Holder: named(last)}, true, nil
	case busy(err) && ctx.Err() == nil:
		// The row was busy with another statement: queue again, after
		// busyPause, so that a row kept busy is not tried in a tight loop.
		t := time.NewTimer(busyPause)
		defer t.Stop()
		select {
		case <-t.C:
			return driver.Grant{Holder: named(last)}, false, nil
		case <-ctx.Done():
			return driver.Grant{Holder: named(last)}, false, ctx.Err()
		}
	}
	return driver.Grant{Holder: named(last)}, false, d.classify(err)
}

// serverWait is how long GET_LOCK may wait, in seconds: until ctx's
// deadline, a year without one.
func serverWait(ctx context.Context) float64 {
	if dl, ok := ctx.Deadline(); ok {
		return math.Max(0, time.Until(dl).Seconds())
	}
	return 365 * 24 * 3600
}

// headTurn takes the row for the waiter that holds the wake key on conn,
// attempting again, every headPoll at most, while a lease without the
// key holds it. The key stays on conn for the lease granted; on any other
// outcome conn is closed, which frees the key.
func (d *leases) headTurn(ctx context.Context, req driver.Request, key string, conn *sql.Conn) (driver.Grant, bool, error) {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		sent := time.Now()
		g, err := d.grantOn(ctx, conn, req)
		if err == nil && g.Acquired {
			d.keys.keep(req.Token, key, conn)
			g.Since = sent
			return g, false, nil
		}
		if err != nil {
			discard(conn)
			return g, false, err
		}
		t.Reset(pollFor(g.Holder, headPoll))
		select {
		case <-t.C:
		case <-ctx.Done():
			discard(conn)
			return driver.Grant{Holder: g.Holder}, false, ctx.Err()
		}
	}
}

// pollFor is how long to wait before looking at a row whose holder is h
// again: until its TTL runs out, at most most.
func pollFor(h driver.Holder, most time.Duration) time.Duration {
	if h.TTL >= 0 && h.TTL+time.Millisecond < most {
		return h.TTL + time.Millisecond
	}
	return most
}

// watched is what a watch of the row saw: stale when it ended the wait,
// and the last holder other than the waiter it read (answered).
type watched struct {
	stale, answered bool
	seen            driver.Holder
}

// watchRow checks req's row while its caller waits for the wake key,
// until ctx ends: when the row has been free or expired for handoffGrace
// (the key's holder is stopped or cut off: it takes a free row at once,
// and polls an expired one every headPoll at most), it calls stop and
// reports stale. A failed check is retried at the next. The first check is
// after h's TTL, or watchEvery when h is not known (TTL < 0).
func (d *leases) watchRow(ctx context.Context, req driver.Request, h driver.Holder, stop func()) watched {
	var w watched
	t := time.NewTimer(pollFor(h, watchEvery))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return w
		case <-t.C:
		}
		var r row
		err := d.db.QueryRowContext(ctx, d.state, req.Name).Scan(&r.token, &r.owner, &r.fence, &r.micros)
		if err == nil && !r.live() && r.micros <= -handoffGrace.Microseconds() {
			stop()
			w.stale = true
			return w
		}
		next := watchEvery
		switch seen, ok := heldBy(req.Name, req.Token, &r); {
		case err != nil:
		case ok:
			w.seen, w.answered = seen, true
			next = pollFor(seen, watchEvery)
		case !r.live(): // kept for the key's holder until handoffGrace has passed
			next = pollFor(handedOnHolder(req.Name, r), watchEvery)
		}
		t.Reset(next)
	}
}

// wakeKey is name's wake key in this driver's table.
func (d *leases) wakeKey(name string) string { return wakeKey(d.table, name) }
