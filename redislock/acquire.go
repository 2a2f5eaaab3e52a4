package redislock

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/internal/rediscore"
	"github.com/redis/go-redis/v9"
)

// ttlMillis converts a TTL to whole milliseconds, rounding down so that the
// server never keeps a lock longer than the holder was told.
func ttlMillis(ttl time.Duration) int64 { return max(ttl.Milliseconds(), 1) }

// TryAcquire runs the acquire script: one round trip that takes the lock
// and issues its fence, or describes the holder.
func (d *redisDriver) TryAcquire(ctx context.Context, req driver.Request) (driver.Grant, error) {
	g, _, err := d.attempt(ctx, req, queuing{})
	return g, err
}

// attempt is one acquire (with WAIT for replicas when configured). It also
// returns the server's clock (µs) when the script ran.
func (d *redisDriver) attempt(ctx context.Context, req driver.Request, q queuing) (driver.Grant, uint64, error) {
	type reply struct {
		g  driver.Grant
		us uint64
	}
	r, err := boundedAfter(ctx, d, func() (reply, error) {
		var r reply
		var err error
		if d.cfg.replicas > 0 {
			r.g, r.us, err = d.acquireSynced(ctx, req, q)
		} else {
			r.g, r.us, err = d.acquire(ctx, d.calls, req, q)
		}
		return r, err
	}, func(r reply, err error) {
		// Given up on: whatever the attempt won or queued is undone
		// after it, not before (the caller's own cleanups may have
		// reached Redis first). A place in the queue, a grant, or an
		// outcome unknown (a grant, maybe) leaves through dequeue, which
		// frees a lock held by the token and wakes the next waiter.
		if q.placeTTL > 0 || r.g.Acquired || err != nil {
			d.leave(req)
		}
	})
	return r.g, r.us, err
}

// acquire runs the acquire script once; queuing with a place TTL, a
// caller that is not granted joins (or stays in) the name's queue.
func (d *redisDriver) acquire(ctx context.Context, c redis.Scripter, req driver.Request, q queuing) (driver.Grant, uint64, error) {
	reply, err := d.acquireCmd(ctx, c, req, q).Slice()
	if err != nil {
		return driver.Grant{}, 0, rediscore.Classify(err)
	}
	g, err := parseGrant(req.Name, reply)
	if err != nil {
		return driver.Grant{}, 0, err
	}
	us, _ := parseFence(reply[len(reply)-1])
	if !g.Acquired {
		d.contention.held(req.Name, time.Now())
	}
	if q.placeTTL > 0 {
		d.sampleSkew(us)
	}
	return g, us, nil
}

// sampleSkew notes the skew of the server's clock that a reply carrying
// the server's time us (µs) shows, taken as the reply arrives.
func (d *redisDriver) sampleSkew(us uint64) {
	if us > 0 {
		d.skew.Store(int64(us) - time.Now().UnixMicro())
	}
}

// acquireCmd sends the acquire script (EVALSHA, EVAL after a NOSCRIPT).
func (d *redisDriver) acquireCmd(ctx context.Context, c redis.Scripter, req driver.Request, q queuing) *redis.Cmd {
	keys := d.keys.Set(req.Name, d.cluster)
	if q.placeTTL <= 0 {
		// A single attempt: the script takes the absent queue arguments
		// as 0, and each argument sent costs the server a string.
		return acquireScript.Run(ctx, c, keys, req.Token, ttlMillis(req.TTL), req.Owner)
	}
	if q.inbox == "" {
		return acquireScript.Run(ctx, c, keys, req.Token, ttlMillis(req.TTL), req.Owner, q.placeTTL.Milliseconds(),
			waitLeft(ctx, q.placeTTL), waitDeadline(ctx, q.placeTTL, d.skew.Load()), q.arrival)
	}
	return acquireScript.Run(ctx, c, keys, req.Token, ttlMillis(req.TTL), req.Owner, q.placeTTL.Milliseconds(),
		waitLeft(ctx, q.placeTTL), waitDeadline(ctx, q.placeTTL, d.skew.Load()), q.arrival, q.inbox)
}

// waitDeadline is ctx's deadline in Unix ms on the server's clock (this
// host's clock plus skew, in µs), rounded down, when waitLeft applies; 0
// otherwise. The script lapses the waiter's place at the sooner of the
// two (what is left counts from when the script runs, later than the send
// by the request's latency, and a release in between would hand the lock
// to a waiter that has returned), and grants nothing to an attempt that
// runs after it: the caller has returned by then, and the lock would be
// held for nobody. skew is a lower bound, below the truth by the latency
// of the call it was read from, so the server's deadline is never later
// than the caller's, at most that much earlier: an attempt in the last
// moments of a wait may be refused, never one that comes after it. Only
// who waits depends on the clocks, never who holds the lock: a clock
// stepped between two attempts costs the next one, whose reply corrects
// the skew.
func waitDeadline(ctx context.Context, placeTTL time.Duration, skew int64) int64 {
	if waitLeft(ctx, placeTTL) == 0 {
		return 0
	}
	dl, _ := ctx.Deadline()
	return max((dl.UnixMicro()+skew)/1000, 1)
}

// waitLeft is what is left of ctx's wait, in whole ms rounded down (at
// least 1), when a queued waiter's place should lapse before its TTL
// does; 0 for none. A release then skips a waiter whose deadline has
// passed instead of handing it the lock: the waiter's dequeue runs in the
// background after it returned, and until then the lock would be reserved
// for nobody.
func waitLeft(ctx context.Context, placeTTL time.Duration) int64 {
	dl, ok := ctx.Deadline()
	if !ok || placeTTL <= 0 {
		return 0
	}
	left := time.Until(dl)
	if left >= placeTTL {
		return 0
	}
	return max(left.Milliseconds(), 1)
}

// parseGrant reads {1, fence, time} or {0, fence, owner, pttl, time}. Only
// a well-formed "held" reply, which is Redis itself saying that another
// token holds the lock (or that the queue reserves it), yields a Grant
// that is not acquired; anything else is an error, never a holder.
func parseGrant(name string, reply []any) (driver.Grant, error) {
	bad := func() (driver.Grant, error) {
		return driver.Grant{}, fmt.Errorf("redislock: unexpected acquire reply %v", reply)
	}
	if len(reply) < 2 {
		return bad()
	}
	fence, err := parseFence(reply[1])
	if err != nil {
		return driver.Grant{}, err
	}
	code, _ := reply[0].(int64)
	switch {
	case code == 1 && reply[0] != nil:
		return driver.Grant{Acquired: true, Fence: fence}, nil
	case code != 0 || len(reply) < 4:
		return bad()
	}
	owner, ok1 := reply[2].(string)
	ms, ok2 := reply[3].(int64)
	if !ok1 || !ok2 {
		return bad()
	}
	return driver.Grant{Holder: driver.Holder{Name: name, Owner: owner, Fence: fence, TTL: pttl(ms)}}, nil
}

func parseFence(v any) (uint64, error) {
	s, _ := v.(string)
	f, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("redislock: fence %v is not a number", v)
	}
	return f, nil
}

// pttl converts a PTTL reply: negative (no TTL, or gone) stays negative.
func pttl(v any) time.Duration {
	ms, ok := v.(int64)
	if !ok || ms < 0 {
		return -1
	}
	return time.Duration(ms) * time.Millisecond
}
