package redislock

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/internal/rediscore"
)

// Waiters queue first-come first-served. A waiter that is not granted is
// put in the name's queue by the acquire script itself; the lock, once
// free, goes only to the queue's head, and the release message goes only
// to that head (on its Locker's inbox, led by its token, or its own
// channel: tell.lua), so one waiter (not every one) is woken and tries.
// A waiter renews its place every waiterPoll; one that stops doing so
// (its process died) is dropped from the queue placeTTL after its last
// attempt.
//
// A release hands the lock to the head for handoffLease only (or its TTL
// if shorter): the release's message is the head's grant, provisional
// (driver.Grant.Window), and the lease's first refresh, due within a
// third of handoffLease, extends it to the head's TTL. So the head goes
// ahead with no round trip of its own, and a head that died since its
// last attempt (its place has not lapsed yet) never extends it: the lock
// lapses after handoffLease, not after the TTL, and the next waiter takes
// it when it next polls (nextPoll: when the holder's TTL runs out). Under
// replica sync, and when the message is lost, the head's next attempt
// finds the lock handed to it and confirms it instead; a head that
// attempts too late rejoins the queue at its own place
// (queuing.arrival): only the time it let run out is lost.
const (
	placeTTL     = 3 * time.Second
	waiterPoll   = time.Second
	handoffLease = time.Second
)

// queuing says how an attempt queues when it is not granted. With a zero
// placeTTL it does not (a single attempt). Otherwise the caller queues (or
// stays queued), and its place lapses placeTTL after the attempt unless
// it comes back. arrival, when not zero, is the server time (µs) of the
// caller's first attempt: a caller whose place was dropped while it was
// alive rejoins there, not at the tail. inbox, when set, is the channel
// of the driver's inbox, where the caller listens: the scripts tell it
// there, with its token, of a hand-off or its turn to try; without one,
// on its own channel.
type queuing struct {
	placeTTL time.Duration
	arrival  uint64
	inbox    string
}

// fairDriver is the driver with driver.Queuer, unless Config.NoFairQueue.
type fairDriver struct{ *redisDriver }

var _ driver.Queuer = fairDriver{}

// AcquireWait implements driver.Queuer: it attempts, listens for its
// messages (on the driver's inbox, or a channel of its own), and waits:
// any message (a hand-off, or its turn to try), the holder's TTL running
// out, or waiterPoll makes it attempt again, until granted or ctx is
// done. An attempt that finds the lock handed to it confirms the
// hand-off, and the lease counts from that attempt's send time. It
// returns at the first backend error; on any failure it gives up its
// place in the queue.
//
// A waiter listens before its first attempt when that costs no round
// trip (the inbox is subscribed already), or when the name was found held
// lately (contention.recent): a release after that attempt then finds it
// listening. Otherwise the first attempt goes alone, so that a free lock
// costs nothing more, and one that is held is attempted again as soon as
// the waiter listens (a release in between is found by that attempt).
func (d fairDriver) AcquireWait(ctx context.Context, req driver.Request) (driver.Grant, error) {
	l, ok := d.listenNow(req)
	if !ok && d.contention.recent(req.Name, time.Now()) {
		l, ok = d.listen(ctx, req), true
	}
	if ok {
		defer l.stop()
		return d.wait(ctx, req, l, driver.Grant{}, queuing{placeTTL: placeTTL, inbox: l.inbox}, driver.Turn{})
	}
	sent := time.Now()
	g, us, err := d.attempt(ctx, req, queuing{placeTTL: placeTTL})
	if g.Acquired {
		g.Since = sent
	}
	if err != nil || g.Acquired {
		if err != nil {
			d.dequeue(ctx, req)
		}
		return g, err
	}
	l = d.listen(ctx, req)
	defer l.stop()
	return d.wait(ctx, req, l, g, queuing{placeTTL: placeTTL, arrival: us, inbox: l.inbox}, driver.Turn{Sent: sent, Ran: int64(us)})
}

// listening is where a queued wait hears from releases.
type listening struct {
	wake <-chan string
	stop func()
	// inbox is the inbox's channel when the wait listens there.
	inbox string
}

// listenNow listens for req's messages on the driver's inbox if it is
// subscribed already; ok is false otherwise.
func (d *redisDriver) listenNow(req driver.Request) (l listening, ok bool) {
	if !d.inbox.ready() {
		return listening{}, false
	}
	return d.onInbox(req)
}

// listen listens for req's messages: on the driver's inbox, subscribed
// first if need be, else on a channel of req's own (one listener alone on
// its channel: each message's payload matters); were that to fail too,
// nothing comes and the wait polls.
func (d *redisDriver) listen(ctx context.Context, req driver.Request) listening {
	if d.inbox.open(ctx) {
		if l, ok := d.onInbox(req); ok {
			return l
		}
	}
	w := rediscore.NewListener(1)
	stop, err := d.subscribeOwn(ctx, d.keys.WaiterChannel(req.Name, req.Token), w)
	if err != nil {
		stop = func() {}
	}
	return listening{wake: w.Messages(), stop: stop}
}

func (d *redisDriver) onInbox(req driver.Request) (listening, bool) {
	w, stop, ok := d.inbox.register(req.Token)
	if !ok {
		return listening{}, false
	}
	return listening{wake: w.Messages(), stop: stop, inbox: d.inbox.channel}, true
}

// wait is waitLoop on l's messages; a wait that ends without the lock
// leaves the queue.
func (d fairDriver) wait(ctx context.Context, req driver.Request, l listening, last driver.Grant, q queuing, at driver.Turn) (driver.Grant, error) {
	g, err := d.waitLoop(ctx, req, l.wake, last, q, at)
	if err != nil || !g.Acquired {
		d.dequeue(ctx, req)
	}
	return g, err
}

func (d fairDriver) waitLoop(ctx context.Context, req driver.Request, wake <-chan string, last driver.Grant, q queuing, at driver.Turn) (driver.Grant, error) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	// The first pass attempts at once: a release (or hand-off) that came
	// before the subscription was in place is found by this attempt.
	for first := true; ; first = false {
		if !first {
			timer.Reset(nextPoll(last.Holder))
			select {
			case msg := <-wake:
				if g, ok := d.handedOff(msg, at); ok {
					return g, nil
				}
			case <-timer.C:
			case <-ctx.Done():
				return driver.Grant{Holder: last.Holder}, ctx.Err()
			}
		}
		sent := time.Now()
		g, us, err := d.attempt(ctx, req, q)
		if err != nil && ctx.Err() != nil {
			// The wait ran out during an attempt: the last answer Redis
			// gave stands (a failure before it was an error, returned
			// below at once).
			return driver.Grant{Holder: last.Holder}, ctx.Err()
		}
		if err != nil {
			return driver.Grant{}, err
		}
		if g.Acquired {
			// The TTL counts from this attempt (which also confirms a
			// hand-off), not from the queueing.
			g.Since = sent
			return g, nil
		}
		last, at = g, driver.Turn{Sent: sent, Ran: int64(us)}
		if q.arrival == 0 {
			q.arrival = us // a caller dropped from the queue rejoins at its first attempt's place
		}
	}
}

// handedOff reads a hand-off, "p FENCE TIME PX": the lock is this
// waiter's for PX ms from the server time TIME, a provisional grant
// (driver.Grant.Window) that the lease's first refresh extends to its
// TTL, with no round trip before the waiter goes ahead. Under replica
// sync it is not taken as is: the next attempt finds the lock held by
// this token and confirms it with WAIT.
func (d fairDriver) handedOff(msg string, at driver.Turn) (driver.Grant, bool) {
	f := strings.Fields(msg)
	if len(f) != 4 || f[0] != "p" || d.cfg.replicas > 0 {
		return driver.Grant{}, false
	}
	fence, err1 := strconv.ParseUint(f[1], 10, 64)
	us, err2 := strconv.ParseUint(f[2], 10, 64)
	px, err3 := strconv.ParseInt(f[3], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || px <= 0 {
		return driver.Grant{}, false
	}
	return driver.Grant{Acquired: true, Fence: fence, Since: at.Since(int64(us)), Window: time.Duration(px) * time.Millisecond}, true
}

// nextPoll is when to try again without a release message: when the
// holder's TTL runs out (expiry sends no message), at the latest after
// waiterPoll, which also renews the waiter's place in the queue.
func nextPoll(h driver.Holder) time.Duration {
	if h.TTL >= 0 && h.TTL < waiterPoll {
		return h.TTL + time.Millisecond
	}
	return waiterPoll
}

// dequeue gives up req's place in the queue, best effort, in the
// background and detached from ctx (usually done by now), so that the
// caller returns by its deadline; Close waits for it.
func (d *redisDriver) dequeue(ctx context.Context, req driver.Request) {
	d.background(ctx, func(ctx context.Context) { d.runDequeue(ctx, req) })
}

// leave is dequeue run in the calling goroutine, bounded by
// cleanupTimeout.
func (d *redisDriver) leave(req driver.Request) {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	d.runDequeue(ctx, req)
}

// runDequeue sends the dequeue script: req's token leaves the name's
// queue, and a lock it holds is freed.
func (d *redisDriver) runDequeue(ctx context.Context, req driver.Request) {
	keys := []string{d.keys.Lock(req.Name), d.keys.Queue(req.Name), d.keys.Deadlines(req.Name), d.keys.Asks(req.Name)}
	_ = dequeueScript.Run(ctx, d.client, keys, req.Token, d.keys.Channel(req.Name)).Err()
}

// cleanupTimeout bounds each background cleanup.
const cleanupTimeout = time.Second

// background runs fn detached from ctx's cancellation, bounded by
// cleanupTimeout, tracked for Close.
func (d *redisDriver) background(ctx context.Context, fn func(context.Context)) {
	d.bg.Add(1)
	go func() {
		defer d.bg.Done()
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		fn(ctx)
	}()
}
