package rediscore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlockdev/dlock/internal/rediscore"
	"github.com/redis/go-redis/v9"
)

// Scripts of the coalescing tests: echo answers its argument, or fails
// when the argument says so; spin keeps the server busy for ARGV[1] µs.
var (
	echo = redis.NewScript(`if ARGV[1] == 'fail' then return redis.error_reply('asked to fail') end
return ARGV[1]`)
	spin = redis.NewScript(`local t = redis.call('TIME')
repeat local n = redis.call('TIME') until (n[1] - t[1]) * 1000000 + (n[2] - t[2]) >= tonumber(ARGV[1])
return 1`)
)

// trips counts the EVALSHA calls a client sends, alone and in pipelines,
// and their last arguments.
type trips struct {
	single, pipelines, piped atomic.Int64
	mu                       sync.Mutex
	sent                     []string
}

func (h *trips) note(cmds ...redis.Cmder) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range cmds {
		if c.Name() == "evalsha" {
			h.sent = append(h.sent, fmt.Sprint(c.Args()[len(c.Args())-1]))
		}
	}
}

func (h *trips) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *trips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "evalsha" {
			h.single.Add(1)
		}
		h.note(cmd)
		return next(ctx, cmd)
	}
}
func (h *trips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) > 0 && cmds[0].Name() == "evalsha" {
			h.pipelines.Add(1)
			h.piped.Add(int64(len(cmds)))
		}
		h.note(cmds...)
		return next(ctx, cmds)
	}
}

func (h *trips) wasSent(arg string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range h.sent {
		if s == arg {
			return true
		}
	}
	return false
}

// coalescing starts a server and a client counting its round trips, with
// the scripts loaded.
func coalescing(t *testing.T) (*redis.Client, *trips) {
	t.Helper()
	s, _ := server(t)
	c := redis.NewClient(&redis.Options{Addr: s.Addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	for _, sc := range []*redis.Script{echo, spin} {
		if err := sc.Load(context.Background(), c).Err(); err != nil {
			t.Fatal(err)
		}
	}
	h := &trips{}
	c.AddHook(h)
	return c, h
}

// TestCoalescerPipelinesConcurrentCalls: 64 goroutines calling at once
// each get their own answer, in fewer round trips than calls; one
// goroutine alone sends its calls one by one, never pipelined.
func TestCoalescerPipelinesConcurrentCalls(t *testing.T) {
	c, h := coalescing(t)
	k := rediscore.NewCoalescer(c, 2)
	ctx := context.Background()
	for i := range 50 {
		if got, err := echo.Run(ctx, k, []string{"k"}, i).Text(); err != nil || got != fmt.Sprint(i) {
			t.Fatalf("alone: call %d answered %q, %v", i, got, err)
		}
	}
	if n := h.pipelines.Load(); n != 0 {
		t.Fatalf("one goroutine alone sent %d pipelines, want none", n)
	}
	h.single.Store(0)
	const goroutines, calls = 64, 200
	var wg sync.WaitGroup
	var wrong atomic.Int64
	for g := range goroutines {
		wg.Go(func() {
			for i := range calls {
				want := fmt.Sprintf("%d-%d", g, i)
				if got, err := echo.Run(ctx, k, []string{"k" + want}, want).Text(); err != nil || got != want {
					wrong.Add(1)
					t.Errorf("call %s answered %q, %v", want, got, err)
				}
			}
		})
	}
	wg.Wait()
	total := int64(goroutines * calls)
	trips := h.single.Load() + h.pipelines.Load()
	t.Logf("%d calls in %d round trips (%d pipelines carrying %d calls)", total, trips, h.pipelines.Load(), h.piped.Load())
	if wrong.Load() > 0 {
		t.Fatalf("%d calls answered wrong", wrong.Load())
	}
	if h.single.Load()+h.piped.Load() != total {
		t.Fatalf("sent %d commands for %d calls", h.single.Load()+h.piped.Load(), total)
	}
	if trips >= total {
		t.Fatalf("%d calls took %d round trips: nothing was coalesced", total, trips)
	}
}

// TestCoalescerKeepsEachCallsError: a script error in a pipeline is its
// call's alone.
func TestCoalescerKeepsEachCallsError(t *testing.T) {
	c, h := coalescing(t)
	k := rediscore.NewCoalescer(c, 1)
	ctx := context.Background()
	for round := 0; h.pipelines.Load() == 0; round++ {
		if round == 100 {
			t.Fatal("no pipeline in 100 rounds of 16 concurrent calls")
		}
		var wg sync.WaitGroup
		for g := range 16 {
			wg.Go(func() {
				arg := fmt.Sprint(g)
				if g%4 == 0 {
					arg = "fail"
				}
				got, err := echo.Run(ctx, k, []string{"k"}, arg).Text()
				switch {
				case arg == "fail" && (err == nil || !strings.Contains(err.Error(), "asked to fail")):
					t.Errorf("failing call answered %q, %v", got, err)
				case arg != "fail" && (err != nil || got != arg):
					t.Errorf("call %s answered %q, %v: another call's error reached it", arg, got, err)
				}
			})
		}
		wg.Wait()
	}
}

// TestCoalescerCallReturnsByItsDeadline: while the server is busy with a
// call, a call queued behind it returns at its own deadline and is never
// sent; one queued without a deadline is sent next and answered; and a
// call whose deadline passes while its pipeline is in flight does not cut
// short the others in that pipeline.
func TestCoalescerCallReturnsByItsDeadline(t *testing.T) {
	c, h := coalescing(t)
	k := rediscore.NewCoalescer(c, 1)
	ctx := context.Background()
	busy := make(chan error, 1)
	go func() { busy <- spin.Run(ctx, k, []string{"spin"}, 1_000_000).Err() }()
	waitFor(t, func() bool { return h.single.Load() > 0 })

	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	patient := make(chan error, 1)
	go func() {
		got, err := echo.Run(ctx, k, []string{"k"}, "patient").Text()
		if err == nil && got != "patient" {
			err = fmt.Errorf("answered %q", got)
		}
		patient <- err
	}()
	start := time.Now()
	err := echo.Run(short, k, []string{"k"}, "hasty").Err()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("queued call with a 50ms deadline: %v, want the deadline", err)
	}
	if took := time.Since(start); took > 600*time.Millisecond {
		t.Fatalf("queued call with a 50ms deadline returned after %v, behind a 1s call", took)
	}
	if err := <-busy; err != nil {
		t.Fatal(err)
	}
	if err := <-patient; err != nil {
		t.Fatalf("call queued without a deadline: %v", err)
	}
	if h.wasSent("hasty") {
		t.Fatal("a call whose deadline passed while it was queued was sent")
	}

	// early heads a pipeline with a long call (1 s) and late; early's
	// deadline (150 ms) passes while the pipeline is in flight, late's
	// does not.
	go func() { busy <- spin.Run(ctx, k, []string{"spin"}, 100_000).Err() }()
	waitFor(t, func() bool { return h.single.Load() > 2 })
	early, cancelEarly := context.WithTimeout(ctx, 150*time.Millisecond)
	defer cancelEarly()
	long, cancelLong := context.WithTimeout(ctx, 5*time.Second)
	defer cancelLong()
	first, second := make(chan error, 1), make(chan error, 1)
	go func() {
		start := time.Now()
		err := echo.Run(early, k, []string{"k"}, "early").Err()
		if took := time.Since(start); err != nil && took > 700*time.Millisecond {
			err = fmt.Errorf("%w, after %v", err, took)
		}
		first <- err
	}()
	waitFor(t, func() bool { return queued(k) == 1 })
	go func() { second <- spin.Run(long, k, []string{"spin"}, 1_000_000).Err() }()
	waitFor(t, func() bool { return queued(k) == 2 })
	got, err := echo.Run(long, k, []string{"k"}, "late").Text()
	if err != nil || got != "late" {
		t.Fatalf("call in one pipeline with one whose deadline passed in flight: %q, %v", got, err)
	}
	if err := <-first; !errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "after") {
		t.Fatalf("call whose deadline passed in flight: %v, want the deadline, by it", err)
	}
	for _, ch := range []chan error{busy, second} {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
}

func queued(k *rediscore.Coalescer) int { return rediscore.Queued(k) }

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for range 500 {
		if cond() {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatal("condition not met within 1s")
}
