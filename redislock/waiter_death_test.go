package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/internal/rediscore"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	"github.com/dlockdev/dlock/redislock"
	"github.com/redis/go-redis/v9"
)

// envWaiterChild makes the test binary play a queued waiter: "ADDR NAME
// TTL".
const envWaiterChild = "DLOCK_REDISLOCK_WAITER_CHILD"

// waiterChild waits for NAME on the fair queue of the Redis at ADDR,
// prints "granted FENCE" once it holds it, and releases it when its stdin
// closes.
func waiterChild(spec string) error {
	f := strings.Fields(spec)
	if len(f) != 3 {
		return fmt.Errorf("%s=%q: want ADDR NAME TTL", envWaiterChild, spec)
	}
	ttl, err := time.ParseDuration(f[2])
	if err != nil {
		return err
	}
	c := redis.NewClient(&redis.Options{Addr: f[0]})
	defer c.Close()
	l, err := redislock.Config{Logger: slog.New(slog.DiscardHandler)}.Locker(c)
	if err != nil {
		return err
	}
	defer l.Close()
	ctx := context.Background()
	ls, err := l.Acquire(ctx, f[1], dlock.WithTTL(ttl), dlock.WithWait(time.Minute))
	if err != nil {
		return err
	}
	fmt.Println("granted", ls.Fence())
	_, _ = io.Copy(io.Discard, os.Stdin)
	return ls.Release(ctx)
}

// startWaiterChild starts a waiter child for name; it is killed at the
// end of the test if still running.
func startWaiterChild(t *testing.T, addr, name string, ttl time.Duration) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envWaiterChild+"="+addr+" "+name+" "+ttl.String())
	cmd.Stdout, cmd.Stderr = io.Discard, os.Stderr
	stdin, err := cmd.StdinPipe() // held open: the child holds until it closes
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = stdin.Close()
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return cmd
}

// heldOnNewServer starts a Redis server on which a Locker (closed when t
// ends) holds name for ttl; it returns the server, a client on it and the
// lease.
func heldOnNewServer(t *testing.T, name string, ttl time.Duration) (*testserver.RedisServer, redis.UniversalClient, *dlock.Lease) {
	t.Helper()
	srv := testserver.Redis(t)
	l := lockerWith(t, client(t, srv.Addr), redislock.Config{})
	t.Cleanup(func() { _ = l.Close() })
	held, err := l.Acquire(ctxT(t), name, dlock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	return srv, client(t, srv.Addr), held
}

// TestDeadHeadWaiterDoesNotKeepTheLock: A holds a name with a 30 s TTL; B
// (a separate process) and then C queue for it; B is SIGKILLed right
// before A releases, while its place in the queue is still live. The lock
// must reach C long before a TTL has passed: a release that hands the
// lock to a head that has just died must not leave it held by the dead
// process for the TTL. The measured delay is logged.
func TestDeadHeadWaiterDoesNotKeepTheLock(t *testing.T) {
	const ttl = 30 * time.Second
	const name = "death/head"
	srv, admin, held := heldOnNewServer(t, name, ttl)
	ctx := ctxT(t)

	b := startWaiterChild(t, srv.Addr, name, ttl)
	waitQueued(t, admin, name, 1)
	c := lockerWith(t, client(t, srv.Addr), redislock.Config{})
	defer c.Close()
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type grant struct {
		ls  *dlock.Lease
		err error
		at  time.Time
	}
	got := make(chan grant, 1)
	go func() {
		ls, err := c.Acquire(cctx, name, dlock.WithTTL(ttl), dlock.WithWait(time.Minute))
		got <- grant{ls, err, time.Now()}
	}()
	defer func() { // C's wait ends before its Locker closes
		cancel()
		if g := <-got; g.ls != nil {
			_ = g.ls.Release(ctx)
		}
	}()
	waitQueued(t, admin, name, 2)

	if err := b.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = b.Wait()
	if n := admin.ZCard(ctx, keys.Queue(name)).Val(); n != 2 {
		t.Fatalf("%d queued right after B died, want 2: the dead B's place must still be live at the release", n)
	}
	released := time.Now()
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case g := <-got:
		got <- g // for the deferred clean-up
		if g.err != nil {
			t.Fatalf("C: %v", g.err)
		}
		delay := g.at.Sub(released)
		t.Logf("C granted %s after A released (TTL %s, B killed right before the release)", delay.Round(time.Millisecond), ttl)
		if g.ls.Fence() <= held.Fence() {
			t.Errorf("C's fence %d is not above A's %d", g.ls.Fence(), held.Fence())
		}
	case <-time.After(ttl / 4):
		v, _ := admin.Get(ctx, keys.Lock(name)).Result()
		t.Fatalf("C not granted %s after A released (TTL %s); the lock is held by %q for %s more: the dead waiter B got it",
			ttl/4, ttl, strings.ReplaceAll(v, "\n", " "), admin.PTTL(ctx, keys.Lock(name)).Val())
	}
}

// TestLateConfirmationKeepsItsPlace: a live head that confirms a hand-off
// with an attempt of its own (under replica sync; also a head whose
// message was lost) and whose attempt reaches Redis after the hand-off
// lease ran out (here: held back 2.5 s) loses that one turn, to the next
// waiter C, and nothing more: it rejoins the queue at its own place,
// ahead of D, who queued after it, and is granted right after C.
func TestLateConfirmationKeepsItsPlace(t *testing.T) {
	const name = "death/late"
	srv, admin, held := heldOnNewServer(t, name, time.Minute)
	testserver.RedisReplica(t, srv)
	ctx := ctxT(t)
	var late atomic.Bool
	bc := client(t, srv.Addr)
	bc.AddHook(gateScript{hash: redislock.AcquireScript.Hash(), gate: func(ctx context.Context) error {
		if !late.Load() {
			return nil
		}
		select {
		case <-time.After(2500 * time.Millisecond):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}})
	granted := make(chan string, 3)
	var wg sync.WaitGroup
	release := map[string]func(){} // lets who release its lease, once
	for i, who := range []string{"B", "C", "D"} {
		c := bc
		if who != "B" {
			c = client(t, srv.Addr)
		}
		cfg := redislock.Config{}
		if who == "B" {
			cfg.ReplicaSync = 1
		}
		l := lockerWith(t, c, cfg)
		defer l.Close()
		proceed := make(chan struct{})
		release[who] = sync.OnceFunc(func() { close(proceed) })
		wg.Go(func() {
			ls, err := l.Acquire(ctx, name, dlock.WithTTL(time.Minute), dlock.WithWait(time.Minute))
			if err != nil {
				t.Errorf("%s: %v", who, err)
				granted <- who + " failed"
				return
			}
			granted <- who
			<-proceed
			_ = ls.Release(ctx)
		})
		waitQueued(t, admin, name, i+1)
	}
	defer func() { // every waiter returns before its Locker closes
		for _, r := range release {
			r()
		}
		wg.Wait()
	}()
	next := func(want string) {
		t.Helper()
		select {
		case got := <-granted:
			if got != want {
				t.Fatalf("granted %s, want %s", got, want)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("nobody granted in 20 s, want %s", want)
		}
	}

	late.Store(true)
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	v, _ := admin.Get(ctx, keys.Lock(name)).Result()
	bToken, _, _ := strings.Cut(v, "\n")
	next("C") // B's confirmation is late: the hand-off lapsed
	for deadline := time.Now().Add(10 * time.Second); admin.ZScore(ctx, keys.Queue(name), bToken).Err() != nil; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("B (token %q) never came back to the queue", bToken)
		}
	}
	if head := admin.ZRange(ctx, keys.Queue(name), 0, 0).Val(); len(head) != 1 || head[0] != bToken {
		t.Errorf("queue head %v after B's late confirmation, want B (%s) back at its place, before D", head, bToken)
	}
	late.Store(false)
	release["C"]()
	next("B")
	release["B"]()
	next("D")
	release["D"]()
}

// TestLateRefreshOfAHandOffLosesIt: a hand-off is the head's grant for one
// second until its first refresh extends it. A live head whose refresh is
// held back past that second (a long pause) is told its lease was lost,
// as any holder whose refresh comes too late, and the next waiter C takes
// the lock with a higher fence, long before the head's TTL would pass.
func TestLateRefreshOfAHandOffLosesIt(t *testing.T) {
	const name = "death/late-refresh"
	srv, admin, held := heldOnNewServer(t, name, time.Minute)
	ctx := ctxT(t)
	bc := client(t, srv.Addr)
	bc.AddHook(gateScript{hash: rediscore.Refresh.Hash(), gate: func(ctx context.Context) error {
		select {
		case <-time.After(2500 * time.Millisecond):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}})
	type grant struct {
		ls  *dlock.Lease
		err error
	}
	var leases [2]chan grant
	for i, c := range []redis.UniversalClient{bc, client(t, srv.Addr)} {
		l := lockerWith(t, c, redislock.Config{})
		t.Cleanup(func() { _ = l.Close() })
		leases[i] = make(chan grant, 1)
		go func() {
			ls, err := l.Acquire(ctx, name, dlock.WithTTL(time.Minute), dlock.WithWait(time.Minute))
			leases[i] <- grant{ls, err}
		}()
		waitQueued(t, admin, name, i+1)
	}
	released := time.Now()
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	b := <-leases[0]
	if b.err != nil {
		t.Fatalf("B: %v", b.err)
	}
	select {
	case <-b.ls.Done():
	case <-time.After(20 * time.Second):
		t.Fatalf("B's refresh was held back 2.5 s past its 1 s hand-off, and its lease is still %v", b.ls.Err())
	}
	if !errors.Is(b.ls.Err(), dlock.ErrLost) {
		t.Errorf("B's lease ended with %v, want ErrLost", b.ls.Err())
	}
	c := <-leases[1]
	if c.err != nil {
		t.Fatalf("C: %v", c.err)
	}
	defer c.ls.Release(ctx)
	if c.ls.Fence() <= b.ls.Fence() {
		t.Errorf("C's fence %d is not above B's %d", c.ls.Fence(), b.ls.Fence())
	}
	t.Logf("C granted %s after the release", time.Since(released).Round(time.Millisecond))
}

// TestHandOffWithoutWatchdogIsConfirmed: a lease without the watchdog
// (WithAutoRefresh(false)) has nothing to extend a provisional hand-off,
// so the acquire confirms it before it returns: the holder gets the TTL
// it asked for, in Redis as in Expires.
func TestHandOffWithoutWatchdogIsConfirmed(t *testing.T) {
	const name = "death/no-watchdog"
	srv, admin, held := heldOnNewServer(t, name, time.Minute)
	ctx := ctxT(t)
	l := lockerWith(t, client(t, srv.Addr), redislock.Config{})
	defer l.Close()
	got := make(chan *dlock.Lease, 1)
	go func() {
		ls, err := l.Acquire(ctx, name, dlock.WithTTL(time.Minute), dlock.WithWait(time.Minute), dlock.WithAutoRefresh(false))
		if err != nil {
			t.Error(err)
		}
		got <- ls
	}()
	waitQueued(t, admin, name, 1)
	released := time.Now()
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	ls := <-got
	if ls == nil {
		t.FailNow()
	}
	defer ls.Release(ctx)
	if left := admin.PTTL(ctx, keys.Lock(name)).Val(); left < 50*time.Second {
		t.Errorf("the lock has %s left in Redis after the acquire returned, want its 1m TTL", left)
	}
	if ls.Expires().Before(released.Add(50 * time.Second)) {
		t.Errorf("the lease expires %s after the release, want about its 1m TTL", ls.Expires().Sub(released))
	}
}
