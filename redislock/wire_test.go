package redislock_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	"github.com/dlockdev/dlock/redislock"
	"github.com/redis/go-redis/v9"
)

// counter is a go-redis hook that records every command sent, alone or in
// a pipeline. A new connection's handshake (HELLO, CLIENT SETINFO) is
// kept apart: the eviction watcher's pub/sub connection is dialled on the
// first grant, once per Locker, not once per cycle.
type counter struct {
	mu        sync.Mutex
	cmds      map[string]int
	n         int
	handshake int
}

// handshakeCmds are the commands go-redis sends on every new connection.
var handshakeCmds = map[string]bool{"hello": true, "client": true}

func (c *counter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.add(cmd)
		return next(ctx, cmd)
	}
}

func (c *counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			c.add(cmd)
		}
		return next(ctx, cmds)
	}
}

func (c *counter) add(cmd redis.Cmder) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if handshakeCmds[cmd.Name()] {
		c.handshake++
		return
	}
	if c.cmds == nil {
		c.cmds = map[string]int{}
	}
	c.cmds[cmd.FullName()]++
	c.n++
}

// count is how many commands were counted since the last reset.
func (c *counter) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

func (c *counter) reset() (int, map[string]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, m := c.n, c.cmds
	if c.handshake > 0 {
		if m == nil {
			m = map[string]int{}
		}
		m["(handshake, not counted)"] = c.handshake
	}
	c.n, c.cmds, c.handshake = 0, nil, 0
	return n, m
}

// TestWireCount: 1,000 uncontended acquire+release cycles send exactly
// 2,000 commands (one per acquire, fence included, one per release), with
// TryAcquire and Acquire, with the fair queue (the default) and without
// it. Under contention the two differ: with the fair queue a release
// wakes only the head of the queue, so each hand-off costs one attempt
// and the other waiters send nothing but their timed renewals; without
// it every waiter tries again after each release, and all but one of
// those attempts are refused (see testWireContended).
func TestWireCount(t *testing.T) {
	t.Run("fair", func(t *testing.T) {
		cfg := redislock.Config{}
		testWireCount(t, cfg)
		if wasted, _ := testWireContended(t, cfg, true); wasted != 0 {
			t.Errorf("with the fair queue, %d refused attempts came sooner than a renewal, want 0 (a release wakes only the head)", wasted)
		}
	})
	t.Run("unfair", func(t *testing.T) {
		cfg := redislock.Config{NoFairQueue: true}
		testWireCount(t, cfg)
		if refused, least := testWireContended(t, cfg, false); refused < least {
			t.Errorf("without the fair queue, %d attempts were refused, want at least %d (every waiter tries after each release; one wins)", refused, least)
		}
	})
}

func testWireCount(t *testing.T, cfg redislock.Config) {
	srv := testserver.Redis(t)
	c := client(t, srv.Addr)
	var hook counter
	c.AddHook(&hook)
	l := lockerWith(t, c, cfg)
	defer l.Close()
	setup, setupCmds := hook.reset()
	t.Logf("New sent %d commands: %v", setup, setupCmds)
	ctx := ctxT(t)
	var last uint64
	for i := range 1000 {
		acquire := l.TryAcquire
		if i%2 == 1 {
			acquire = l.Acquire
		}
		ls, err := acquire(ctx, fmt.Sprintf("wire/%d", i%10), dlock.WithTTL(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if i%10 == 0 && ls.Fence() <= last {
			t.Fatalf("fence %d after %d", ls.Fence(), last)
		}
		last = ls.Fence()
		if err := ls.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	n, cmds := hook.reset()
	t.Logf("1000 cycles sent %d commands: %v", n, cmds)
	if n > 2000 {
		t.Errorf("1000 acquire+release cycles sent %d commands, want <= 2000: %v", n, cmds)
	}
	if n < 2000 {
		t.Errorf("1000 cycles sent only %d commands: the hook misses some", n)
	}
}

// TestWireCountNoScriptCache: after SCRIPT FLUSH, the first EVALSHA of a
// script answers NOSCRIPT and one EVAL reloads it; later calls are back to
// one command each.
func TestWireCountNoScriptCache(t *testing.T) {
	srv := testserver.Redis(t)
	c := client(t, srv.Addr)
	l := locker(t, c)
	defer l.Close()
	ctx := ctxT(t)
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	var hook counter
	c.AddHook(&hook)
	for range 10 {
		ls, err := l.TryAcquire(ctx, "wire/flushed")
		if err != nil {
			t.Fatal(err)
		}
		if err := ls.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n, cmds := hook.reset(); n != 22 {
		t.Errorf("10 cycles after SCRIPT FLUSH sent %d commands, want 20 + 2 reloads: %v", n, cmds)
	}
}

// renewal is how often a waiter in the fair queue renews its place
// (redislock's waiterPoll): with nothing else to wake it, a queued waiter
// attempts this long after its last attempt, or once the holder's TTL
// runs out if that is sooner.
const renewal = time.Second

// attemptLog is a go-redis hook that records the acquire script's
// attempts of one client, and whether each was granted.
type attemptLog struct {
	mu   sync.Mutex
	list []attempt
}

type attempt struct {
	start, end time.Time
	granted    bool
	holderTTL  time.Duration // for a refused attempt: the holder's, -1 if none reported
}

func (a *attemptLog) DialHook(next redis.DialHook) redis.DialHook { return next }

func (a *attemptLog) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (a *attemptLog) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		if cmd.Name() != "evalsha" || len(args) < 2 || args[1] != redislock.AcquireScript.Hash() {
			return next(ctx, cmd)
		}
		at := attempt{start: time.Now(), holderTTL: -1}
		err := next(ctx, cmd)
		at.end = time.Now()
		// {1, fence, time} when granted, else {0, fence, owner, pttl, time}.
		if reply, rerr := cmd.(*redis.Cmd).Slice(); rerr == nil && len(reply) >= 3 {
			code, _ := reply[0].(int64)
			at.granted = code == 1
			if ms, ok := reply[len(reply)-2].(int64); ok && !at.granted && ms >= 0 {
				at.holderTTL = time.Duration(ms) * time.Millisecond
			}
		}
		a.mu.Lock()
		a.list = append(a.list, at)
		a.mu.Unlock()
		return err
	}
}

func (a *attemptLog) snapshot() []attempt {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]attempt(nil), a.list...)
}

// since counts the attempts that started after t.
func (a *attemptLog) since(t time.Time) int {
	n := 0
	for _, at := range a.snapshot() {
		if at.start.After(t) {
			n++
		}
	}
	return n
}

// refusedByWake counts the refused attempts that started after t and
// were not timed renewals: they came sooner after the waiter's previous
// attempt than its renewal timer (renewal, or the holder's TTL then
// reported if sooner) would have fired.
func (a *attemptLog) refusedByWake(t time.Time) (wake, timed int) {
	list := a.snapshot()
	for i, at := range list {
		if at.granted || !at.start.After(t) {
			continue
		}
		due := renewal
		if i > 0 && list[i-1].holderTTL >= 0 && list[i-1].holderTTL < due {
			due = list[i-1].holderTTL
		}
		if i > 0 && at.start.Sub(list[i-1].end) >= due {
			timed++
			continue
		}
		wake++
	}
	return wake, timed
}

// testWireContended hands one lock down a line of waiters, each on its
// own Locker and client, one release at a time: the test releases each
// grant itself. fair says which queue cfg should give: with the fair
// queue every waiter is queued in Redis, and it returns the refused
// attempts that were not timed renewals (least is 0). Without it nobody
// is queued; after each release it waits until every waiter still
// waiting has attempted since (each must: woken by the release, or
// polling), so that each step refuses at least one attempt per waiter but
// the winner; it returns the refused attempts and that lower bound.
func testWireContended(t *testing.T, cfg redislock.Config, fair bool) (refused, least int) {
	srv := testserver.Redis(t)
	ctx := ctxT(t)
	const waiters = 5
	name := "wire/contended"
	holder := lockerWith(t, client(t, srv.Addr), cfg)
	defer holder.Close()
	first, err := holder.Acquire(ctx, name, dlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	logs := make([]*attemptLog, waiters)
	granted := make(chan *dlock.Lease, waiters)
	var wg sync.WaitGroup
	defer wg.Wait()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel() // before wg.Wait: a failed test ends the waits
	for i := range logs {
		c := client(t, srv.Addr)
		logs[i] = &attemptLog{}
		c.AddHook(logs[i])
		l := lockerWith(t, c, cfg)
		defer l.Close()
		wg.Go(func() {
			ls, err := l.Acquire(wctx, name, dlock.WithTTL(time.Minute), dlock.WithWait(time.Minute))
			if err != nil && !t.Failed() {
				t.Error(err)
			}
			granted <- ls
		})
	}
	// A waiter attempts, subscribes, and attempts again (a release before
	// the subscription was in place is found by that attempt); only then
	// does it wait to be woken.
	for i := range logs {
		waitFor(t, fmt.Sprintf("waiter %d's first two attempts", i), func() bool { return logs[i].since(time.Time{}) >= 2 })
	}
	admin := client(t, srv.Addr)
	if fair {
		waitQueued(t, admin, name, waiters)
	} else if n := admin.ZCard(ctx, keys.Queue(name)).Val(); n != 0 {
		t.Fatalf("%d waiters queued in Redis, want none without the fair queue", n)
	}
	start := time.Now()
	release, rel := first, time.Now()
	waiting := map[*attemptLog]bool{}
	for _, a := range logs {
		waiting[a] = true
	}
	for step := range waiters {
		rel = time.Now()
		if err := release.Release(ctx); err != nil {
			t.Fatal(err)
		}
		ls := <-granted
		if ls == nil {
			t.FailNow()
		}
		for a := range waiting {
			if got := a.snapshot(); len(got) > 0 && got[len(got)-1].granted {
				delete(waiting, a)
			}
		}
		if !fair {
			least += len(waiting)
			for a := range waiting {
				waitFor(t, fmt.Sprintf("step %d: an attempt of every waiter after the release", step), func() bool { return a.since(rel) > 0 })
			}
		}
		release = ls
	}
	if err := release.Release(ctx); err != nil {
		t.Fatal(err)
	}
	var wasted, timed, grants int
	for _, a := range logs {
		for _, at := range a.snapshot() {
			switch {
			case at.granted && at.end.After(start): // one sent just before may win
				grants++
			case !at.granted && at.start.After(start):
				refused++
			}
		}
		w, tm := a.refusedByWake(start)
		wasted += w
		timed += tm
	}
	t.Logf("fair queue %v: %d hand-offs in %v: %d grants, %d refused attempts (%d of them timed renewals)",
		fair, waiters, time.Since(start).Round(time.Millisecond), grants, refused, timed)
	// Without the queue each hand-off is won by one attempt; with it the
	// release grants the head of the queue in its own script and the
	// waiter takes the lock from the message, sending no attempt at all.
	want := waiters
	if fair {
		want = 0
	}
	if grants != want {
		t.Errorf("%d granted attempts for %d hand-offs, want %d", grants, waiters, want)
	}
	if fair {
		return wasted, 0
	}
	return refused, least
}

// waitFor polls cond for up to 30 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 30 s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
