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
}

func (h gateScript) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h gateScript) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if a := cmd.Args(); len(a) > 1 && a[1] == h.hash {
			if err := h.gate(ctx); err != nil {
				return err
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
