package redislock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	"github.com/dlockdev/dlock/redislock"
	"github.com/redis/go-redis/v9"
)

// gateScript is a go-redis hook that makes every call of the script with
// digest hash wait for gate first; gate's error fails the call unsent.
type gateScript struct {
	hash string
	gate func(ctx context.Context) error
	// detach sends the call after the gate even if its context has ended;
	// done, if set, is signalled once it has been answered.
	detach bool
	done   chan<- struct{}
}

func (h gateScript) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h gateScript) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if a := cmd.Args(); len(a) > 1 && a[1] == h.hash {
			if err := h.gate(ctx); err != nil {
				return err
			}
			if h.detach {
				ctx = context.WithoutCancel(ctx)
			}
			if h.done != nil {
				defer func() {
					select {
					case h.done <- struct{}{}:
					default:
					}
				}()
			}
		}
		return next(ctx, cmd)
	}
}

func (h gateScript) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// holdDequeue holds back the dequeue script until release is closed: a
// waiter whose wait ran out, and whose background dequeue has not reached
// Redis yet.
func holdDequeue(release <-chan struct{}) gateScript {
	return gateScript{hash: redislock.DequeueScript.Hash(), gate: func(ctx context.Context) error {
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}}
}

// delayAcquire holds back every acquire script by delay before it is sent
// (unless its context ends first): requests that reach Redis later than
// they were made (a loaded server or network), after the wait they carry
// was taken.
func delayAcquire(delay time.Duration) gateScript {
	return gateScript{hash: redislock.AcquireScript.Hash(), gate: func(ctx context.Context) error {
		select {
		case <-time.After(delay):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}}
}

// TestQueuedPlaceLapsesAtDeadline: a queued waiter's place lapses with its
// wait, so a release right after the waiter gave up leaves the lock free
// (a TryAcquire gets it at once) instead of handing it to the waiter that
// is gone, whose own dequeue may still be on its way (here: held back).
func TestQueuedPlaceLapsesAtDeadline(t *testing.T) {
	lapseCase(t, "lapse", 200*time.Millisecond)
}

// TestQueuedPlaceLapsesAtClientDeadline: a waiter's place lapses at its
// own deadline even when its request reached Redis late. What is left of
// the wait counts from the script's run; without the deadline itself, the
// place would outlive the waiter by the request's latency, and a release
// in between would hand the lock to a waiter that has already returned.
func TestQueuedPlaceLapsesAtClientDeadline(t *testing.T) {
	// Each of the waiter's attempts reaches Redis 150 ms after it took what
	// was left of its 600 ms wait: its place must lapse at its deadline,
	// not 150 ms after it.
	lapseCase(t, "lapse-late", 600*time.Millisecond, delayAcquire(150*time.Millisecond))
}

// lapseCase queues a waiter for name behind a holder, with its dequeue
// held back and hooks added to its client; once its wait has run out, its
// place must still be queued, and a release must leave the lock free for
// a TryAcquire at once.
func lapseCase(t *testing.T, name string, wait time.Duration, hooks ...redis.Hook) {
	t.Helper()
	srv := testserver.Redis(t)
	ctx := ctxT(t)
	holder := lockerWith(t, client(t, srv.Addr), redislock.Config{})
	defer holder.Close()
	wc := client(t, srv.Addr)
	release := make(chan struct{})
	wc.AddHook(holdDequeue(release))
	for _, h := range hooks {
		wc.AddHook(h)
	}
	waiter := lockerWith(t, wc, redislock.Config{})
	// Close waits for the held-back dequeue: let it go first.
	defer waiter.Close()
	defer close(release)

	ls, err := holder.Acquire(ctx, name, dlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := waiter.Acquire(ctx, name, dlock.WithWait(wait)); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("waiter = %v, want ErrNotAcquired after its wait", err)
	}
	if n := wc.ZCard(ctx, keys.Queue(name)).Val(); n != 1 {
		t.Fatalf("%d queued, want the waiter's place still there (its dequeue held back)", n)
	}
	if err := ls.Release(ctx); err != nil {
		t.Fatal(err)
	}
	next, err := holder.TryAcquire(ctx, name)
	if err != nil {
		t.Fatalf("TryAcquire right after the release: %v (the lock went to the waiter that gave up)", err)
	}
	_ = next.Release(ctx)
}

// sendLate holds back every acquire script by delay and then sends it
// whatever became of its caller, signalling landed once Redis answered:
// a request written before its caller's deadline that Redis runs after
// it (the client descheduled between its deadline check and the write, a
// slow link, a server backlog).
func sendLate(delay time.Duration, landed chan<- struct{}) gateScript {
	return gateScript{hash: redislock.AcquireScript.Hash(), gate: func(context.Context) error {
		time.Sleep(delay)
		return nil
	}, detach: true, done: landed}
}

// TestLateAttemptTakesNothing: an attempt that reaches Redis after its
// waiter gave up takes nothing, even when the lock is free by then and
// the waiter's cleanups (its dequeue, the release of its token) came
// first. Granted, it would hold the lock for its whole TTL for nobody.
func TestLateAttemptTakesNothing(t *testing.T) {
	srv := testserver.Redis(t)
	ctx := ctxT(t)
	holder := lockerWith(t, client(t, srv.Addr), redislock.Config{})
	defer holder.Close()
	wc := client(t, srv.Addr)
	landed := make(chan struct{}, 1)
	wc.AddHook(sendLate(400*time.Millisecond, landed))
	waiter := lockerWith(t, wc, redislock.Config{})
	defer waiter.Close()

	const name = "late-attempt"
	ls, err := holder.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := waiter.Acquire(ctx, name, dlock.WithWait(150*time.Millisecond), dlock.WithTTL(time.Minute)); err == nil {
		t.Fatal("the waiter was granted a lock that was held all through its wait")
	}
	if err := ls.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-landed:
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter's held-back attempt never reached Redis")
	}
	if h, held, err := holder.Inspect(ctx, name); err != nil || held {
		t.Fatalf("after the waiter's late attempt the lock is held (%v, %+v, %v), want free", held, h, err)
	}
	if n := wc.ZCard(ctx, keys.Queue(name)).Val(); n != 0 {
		t.Errorf("%d queued after the late attempt, want none", n)
	}
}

// TestLateAttemptFreesItsHandOff: a late attempt that finds the lock
// handed to its own token (the release came while its caller still
// queued, the message was lost) frees it, and tells the next waiter in
// the queue to try; a late attempt never touches a lock another token
// holds.
func TestLateAttemptFreesItsHandOff(t *testing.T) {
	srv := testserver.Redis(t)
	ctx := ctxT(t)
	c := client(t, srv.Addr)
	const name = "late-hand-off"
	ks := keys.Set(name, false)
	now, err := c.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	past := now.Add(-time.Second).UnixMilli()
	// The lock handed to "gone", queued behind it "next".
	c.Set(ctx, keys.Lock(name), "gone\n7\nhost/1", time.Minute)
	c.ZAdd(ctx, keys.Queue(name), redis.Z{Score: 1, Member: "next"})
	sub := c.Subscribe(ctx, keys.WaiterChannel(name, "next"))
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	reply, err := redislock.AcquireScript.Run(ctx, c, ks, "gone", 60000, "host/1", 3000, 1, past, 0).Slice()
	if err != nil {
		t.Fatal(err)
	}
	if reply[0] != int64(0) || reply[3] != int64(-3) {
		t.Fatalf("late attempt's reply %v, want not granted, -3 (after its deadline)", reply)
	}
	if n := c.Exists(ctx, keys.Lock(name)).Val(); n != 0 {
		t.Error("the lock handed to the late attempt's token is still held")
	}
	msg, err := sub.ReceiveMessage(ctx)
	if err != nil || msg.Payload != "" {
		t.Fatalf("next waiter's message %v, %v, want its turn to try", msg, err)
	}
	// Held by another token: untouched, described.
	c.Set(ctx, keys.Lock(name), "other\n8\nhost/2", time.Minute)
	reply, err = redislock.AcquireScript.Run(ctx, c, ks, "gone", 60000, "host/1", 3000, 1, past, 0).Slice()
	if err != nil {
		t.Fatal(err)
	}
	if reply[0] != int64(0) || reply[2] != "host/2" || c.Get(ctx, keys.Lock(name)).Val() != "other\n8\nhost/2" {
		t.Fatalf("late attempt against another holder: reply %v, lock %q", reply, c.Get(ctx, keys.Lock(name)).Val())
	}
}

// TestCanceledAttemptTakesNothing: an attempt whose caller was canceled
// (a context with no deadline, or a wait longer than the place's three
// seconds: no deadline travels with it) and that reaches Redis after the
// caller's cleanups, when the lock is free, does not keep the lock for
// nobody: it is freed as soon as its reply comes, not when its TTL (a
// minute here) runs out.
func TestCanceledAttemptTakesNothing(t *testing.T) {
	for _, tc := range []struct {
		name string
		wait time.Duration
	}{{"single attempt", 0}, {"wait", 10 * time.Second}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := testserver.Redis(t)
			ctx := ctxT(t)
			holder := lockerWith(t, client(t, srv.Addr), redislock.Config{})
			defer holder.Close()
			wc := client(t, srv.Addr)
			landed := make(chan struct{}, 1)
			wc.AddHook(sendLate(400*time.Millisecond, landed))
			waiter := lockerWith(t, wc, redislock.Config{})
			defer waiter.Close()

			const name = "canceled-attempt"
			var ls *dlock.Lease
			if tc.wait > 0 {
				var err error
				if ls, err = holder.Acquire(ctx, name); err != nil {
					t.Fatal(err)
				}
			}
			wctx, cancel := context.WithCancel(ctx)
			time.AfterFunc(150*time.Millisecond, cancel)
			if _, err := waiter.Acquire(wctx, name, dlock.WithWait(tc.wait), dlock.WithTTL(time.Minute)); !errors.Is(err, context.Canceled) {
				t.Fatalf("acquire under a context canceled mid-attempt: %v, want context.Canceled", err)
			}
			if ls != nil {
				if err := ls.Release(ctx); err != nil {
					t.Fatal(err)
				}
			}
			select {
			case <-landed:
			case <-time.After(10 * time.Second):
				t.Fatal("the waiter's held-back attempt never reached Redis")
			}
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				h, held, err := holder.Inspect(ctx, name)
				if err != nil {
					t.Fatal(err)
				}
				if !held {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("5 s after the canceled attempt landed the lock is held (%+v), want free", h)
				}
			}
			if n := wc.ZCard(ctx, keys.Queue(name)).Val(); n != 0 {
				t.Errorf("%d queued after the canceled attempt, want none", n)
			}
		})
	}
}
