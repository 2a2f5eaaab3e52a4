package redislock_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/internal/testserver"
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

// TestWireCount: 1,000 uncontended acquire+release cycles send at most
// 2,000 commands (one per acquire, fence included, one per release), with
// TryAcquire and Acquire, with and without the fair queue.
func TestWireCount(t *testing.T) {
	t.Run("default", func(t *testing.T) { testWireCount(t, redislock.Config{}) })
	t.Run("fair", func(t *testing.T) { testWireCount(t, redislock.Config{NoFairQueue: false}) })
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
