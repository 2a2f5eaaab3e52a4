package redislock_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	"github.com/dlockdev/dlock/redislock"
	"github.com/redis/go-redis/v9"
)

// TestFairQueueOrder: waiters that queue one after another on separate
// Lockers are granted in the order they came.
func TestFairQueueOrder(t *testing.T) {
	srv := testserver.Redis(t)
	ctx := ctxT(t)
	opts := []dlock.Option{dlock.WithTTL(10 * time.Second), dlock.WithWait(30 * time.Second)}
	holder := lockerWith(t, client(t, srv.Addr), redislock.Config{NoFairQueue: false})
	defer holder.Close()
	first, err := holder.Acquire(ctx, "fair/order", opts...)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	admin := client(t, srv.Addr)
	for i := range 5 {
		l := lockerWith(t, client(t, srv.Addr), redislock.Config{NoFairQueue: false})
		defer l.Close()
		wg.Go(func() {
			ls, err := l.Acquire(ctx, "fair/order", opts...)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			_ = ls.Release(ctx)
		})
		waitQueued(t, admin, "fair/order", i+1)
	}
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i, got := range order {
		if got != i {
			t.Fatalf("grant order %v, want 0 1 2 3 4", order)
		}
	}
}

// waitQueued waits until n waiters are queued on name.
func waitQueued(t *testing.T, c redis.UniversalClient, name string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for c.ZCard(ctxT(t), keys.Queue(name)).Val() < int64(n) {
		if time.Now().After(deadline) {
			t.Fatalf("%d waiters never queued on %s", n, name)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestFairQueueRespected: a free lock with a live waiter queued is not
// taken by a one-shot TryAcquire (from a Locker without the fair queue);
// a queued waiter that stopped renewing its place does not block it.
func TestFairQueueRespected(t *testing.T) {
	srv := testserver.Redis(t)
	c := client(t, srv.Addr)
	ctx := ctxT(t)
	l := locker(t, c)
	defer l.Close()
	now := time.Now()
	c.ZAdd(ctx, keys.Queue("fair/q"), redis.Z{Score: float64(now.UnixMicro()), Member: "waiter"})
	c.ZAdd(ctx, keys.Deadlines("fair/q"), redis.Z{Score: float64(now.Add(time.Minute).UnixMilli()), Member: "waiter"})
	_, err := l.TryAcquire(ctx, "fair/q")
	var held *dlock.HeldError
	if !errors.As(err, &held) {
		t.Fatalf("TryAcquire with a live waiter queued = %v, want HeldError", err)
	}
	t.Logf("with a waiter queued: %v", err)
	c.ZAdd(ctx, keys.Deadlines("fair/q"), redis.Z{Score: float64(now.Add(-time.Second).UnixMilli()), Member: "waiter"})
	ls, err := l.TryAcquire(ctx, "fair/q")
	if err != nil {
		t.Fatalf("TryAcquire after the waiter's deadline = %v, want a grant", err)
	}
	_ = ls.Release(ctx)
	if n := c.Exists(ctx, keys.Queue("fair/q"), keys.Deadlines("fair/q")).Val(); n != 0 {
		t.Errorf("%d queue keys left after the dead waiter was dropped", n)
	}
}

// TestFairQueueLeave: a waiter whose wait runs out leaves the queue.
func TestFairQueueLeave(t *testing.T) {
	srv := testserver.Redis(t)
	c := client(t, srv.Addr)
	ctx := ctxT(t)
	l := lockerWith(t, c, redislock.Config{NoFairQueue: false})
	defer l.Close()
	ls, err := l.Acquire(ctx, "fair/leave", dlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer ls.Release(ctx)
	_, err = l.Acquire(ctx, "fair/leave", dlock.WithWait(200*time.Millisecond))
	if !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("bounded wait = %v, want ErrNotAcquired", err)
	}
	// The waiter leaves in the background, so that Acquire returns by its
	// deadline: it is gone a round trip later.
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		n := c.ZCard(ctx, keys.Queue("fair/leave")).Val()
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d waiters still queued 2s after the wait ran out, want 0", n)
		}
	}
}

// shaCounter counts EVALSHA/EVAL calls of one script.
type shaCounter struct {
	counter
	sha string
}

func (c *shaCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if a := cmd.Args(); len(a) > 1 && (a[1] == c.sha || a[0] == "eval") {
			c.add(cmd)
		}
		return next(ctx, cmd)
	}
}

// TestFairHandOff: a release hands the lock straight to the queued waiter,
// which confirms it with one attempt of its own (and no other), with a
// fence above the releaser's and a lease that counts from before the
// confirmation, so never past the release plus the TTL.
func TestFairHandOff(t *testing.T) {
	srv := testserver.Redis(t)
	c := client(t, srv.Addr)
	ctx := ctxT(t)
	hook := &shaCounter{sha: redislock.AcquireScript.Hash()}
	c.AddHook(hook)
	l := lockerWith(t, c, redislock.Config{NoFairQueue: false})
	defer l.Close()
	holder, err := l.Acquire(ctx, "fair/handoff", dlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	got := acquireLater(t, ctx, l, "fair/handoff")
	for c.ZCard(ctx, keys.Queue("fair/handoff")).Val() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond) // the waiter's second attempt, after it subscribed
	hook.reset()
	released := time.Now()
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	next := <-got
	if next == nil {
		t.FailNow()
	}
	defer next.Release(ctx)
	if n, _ := hook.reset(); n != 0 {
		t.Errorf("the waiter sent %d acquire attempts after the release, want none: the hand-off message is its grant", n)
	}
	if next.Fence() <= holder.Fence() {
		t.Errorf("handed-off fence %d, not above the releaser's %d", next.Fence(), holder.Fence())
	}
	// Provisional: the lease expires within the hand-off's second, as the
	// lock does in Redis, until its first refresh extends both to the TTL.
	if exp := next.Expires(); exp.After(released.Add(time.Second)) {
		t.Errorf("handed-off lease expires at %s, after release + the 1 s hand-off %s", exp, released.Add(time.Second))
	}
	// The first refresh extends the lock in Redis, then the lease once its
	// reply is read: wait for both.
	extended := func() bool {
		return c.PTTL(ctx, keys.Lock("fair/handoff")).Val() >= 30*time.Second && !next.Expires().Before(released.Add(30*time.Second))
	}
	for deadline := time.Now().Add(10 * time.Second); !extended(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the handed-off lock was never extended to its TTL: PTTL %s, the lease expires %s after the release",
				c.PTTL(ctx, keys.Lock("fair/handoff")).Val(), next.Expires().Sub(released))
		}
	}
	if next.Err() != nil {
		t.Errorf("after its first refresh the lease is %v; want held", next.Err())
	}
	if n := c.Exists(ctx, keys.Queue("fair/handoff"), keys.Asks("fair/handoff")).Val(); n != 0 {
		t.Errorf("%d queue keys left after the hand-off", n)
	}
}

// TestFairHandOffReplicaSync: under ReplicaSync a hand-off counts only
// once WAIT has confirmed the waiter's confirmation of it. With the
// replica up the waiter is granted, and the replica already has its lock
// with the waiter's TTL (not the hand-off's second); with the replica
// paused the waiter gets an error, never the lock, and the hand-off is
// undone.
func TestFairHandOffReplicaSync(t *testing.T) {
	primary, replica := primaryWithReplica(t)
	ctx := ctxT(t)
	cfg := redislock.Config{ReplicaSync: 1, ReplicaTimeout: 500 * time.Millisecond}
	a := lockerWith(t, client(t, primary.Addr), cfg)
	defer a.Close()
	b := lockerWith(t, client(t, primary.Addr), cfg)
	defer b.Close()
	admin, rc := client(t, primary.Addr), client(t, replica.Addr)
	type result struct {
		ls  *dlock.Lease
		err error
	}
	// handOff has a hold name and b wait for it (for at most wait), then
	// releases it once pause has run.
	handOff := func(name string, wait time.Duration, pause func()) result {
		held, err := a.Acquire(ctx, name, dlock.WithTTL(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan result, 1)
		go func() {
			ls, err := b.Acquire(ctx, name, dlock.WithTTL(time.Minute), dlock.WithWait(wait))
			got <- result{ls, err}
		}()
		waitQueued(t, admin, name, 1)
		pause()
		if err := held.Release(ctx); err != nil {
			t.Fatal(err)
		}
		return <-got
	}

	r := handOff("replica/handoff", 30*time.Second, func() {})
	if r.err != nil {
		t.Fatalf("hand-off with the replica up: %v", r.err)
	}
	v, _ := rc.Get(ctx, keys.Lock("replica/handoff")).Result()
	if ttl := rc.PTTL(ctx, keys.Lock("replica/handoff")).Val(); !strings.HasPrefix(v, r.ls.Token()+"\n") || ttl < 30*time.Second {
		t.Errorf("replica has %q with %s left right after the hand-off's grant; want the waiter's token with its 1m TTL", v, ttl)
	}
	if left := time.Until(r.ls.Expires()); left < 30*time.Second {
		t.Errorf("handed-off lease expires in %s, want about its 1m TTL", left)
	}
	_ = r.ls.Release(ctx)

	r = handOff("replica/handoff-paused", 3*time.Second, replica.Pause)
	defer replica.Resume()
	if r.err == nil {
		_ = r.ls.Release(ctx)
		t.Fatal("hand-off with the replica paused granted the lock, want an error")
	}
	t.Logf("hand-off short of replicas: %v", r.err)
	// Each unconfirmed grant is undone in the background.
	for deadline := time.Now().Add(2 * time.Second); admin.Exists(ctx, keys.Lock("replica/handoff-paused")).Val() != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the lock is still held 2s after the waiter's unconfirmed hand-off")
		}
	}
}

// TestFairWaitOnHeldNameAttemptsOnce: a wait on a name this Locker found
// held a moment ago listens before it attempts, so one attempt queues it
// (the Locker's first wait, on a name not seen held, attempts, subscribes
// the inbox, and attempts again, since a release may have come in
// between), and so does any wait once the inbox is subscribed; the
// release's hand-off still reaches it: it is granted with no attempt
// after the release.
func TestFairWaitOnHeldNameAttemptsOnce(t *testing.T) {
	srv := testserver.Redis(t)
	c := client(t, srv.Addr)
	ctx := ctxT(t)
	hook := &shaCounter{sha: redislock.AcquireScript.Hash()}
	c.AddHook(hook)
	l := lockerWith(t, c, redislock.Config{})
	defer l.Close()
	other := locker(t, client(t, srv.Addr))
	defer other.Close()
	const name = "fair/held-name"

	// wait acquires name, waiting, once other holds it; it returns the
	// acquire attempts the wait sent before other released (once it sent
	// want, and a moment later), and after.
	wait := func(name string, want int) (before, after int) {
		t.Helper()
		holder, err := other.Acquire(ctx, name, dlock.WithTTL(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		hook.reset()
		got := acquireLater(t, ctx, l, name)
		for deadline := time.Now().Add(10 * time.Second); c.ZCard(ctx, keys.Queue(name)).Val() == 0 || hook.count() < want; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the waiter did not queue with %d attempts: %d sent", want, hook.count())
			}
		}
		time.Sleep(50 * time.Millisecond) // room for one more attempt, were one sent
		before, _ = hook.reset()
		if err := holder.Release(ctx); err != nil {
			t.Fatal(err)
		}
		ls := <-got
		if ls == nil {
			t.FailNow()
		}
		after, _ = hook.reset()
		if err := ls.Release(ctx); err != nil {
			t.Fatal(err)
		}
		return before, after
	}
	if before, after := wait(name, 2); before != 2 || after != 0 {
		t.Errorf("the first wait, on a name not seen held, sent %d attempts before the release and %d after, want 2 and 0", before, after)
	}
	if before, after := wait(name, 1); before != 1 || after != 0 {
		t.Errorf("a wait on a name seen held a moment ago sent %d attempts before the release and %d after, want 1 and 0", before, after)
	}
	if before, after := wait("fair/other-name", 1); before != 1 || after != 0 {
		t.Errorf("a wait on a name not seen held, the inbox subscribed, sent %d attempts before the release and %d after, want 1 and 0", before, after)
	}
}
