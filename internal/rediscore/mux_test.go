package rediscore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlockdev/dlock/internal/rediscore"
	"github.com/redis/go-redis/v9"
)

// bound is how long a test waits for something that takes milliseconds:
// far beyond any delay, so that only a missing event fails.
const bound = 30 * time.Second

func newMux(t *testing.T, c redis.UniversalClient) *rediscore.Mux {
	t.Helper()
	m := rediscore.NewMux(c, nil)
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// numSub is how many connections are subscribed to channel.
func numSub(t *testing.T, c *redis.Client, channel string) int64 {
	t.Helper()
	return c.PubSubNumSub(t.Context(), channel).Val()[channel]
}

// TestMuxSubscribe: 40 waiters on 4 channels, subscribing at once, share
// one pub/sub connection; each channel is subscribed when Subscribe
// returns; the channel's last stop unsubscribes before it returns.
func TestMuxSubscribe(t *testing.T) {
	_, c := server(t)
	m := newMux(t, c)
	var mu sync.Mutex
	stops := map[string][]func(){}
	var wg sync.WaitGroup
	for i := range 40 {
		ch := fmt.Sprintf("ch/%d", i%4)
		wg.Go(func() {
			stop, err := m.Subscribe(t.Context(), ch, rediscore.NewWaiter())
			if err != nil {
				t.Error(err)
				return
			}
			if n := numSub(t, c, ch); n != 1 {
				t.Errorf("Subscribe returned before its SUBSCRIBE took effect: NUMSUB %s = %d", ch, n)
			}
			mu.Lock()
			stops[ch] = append(stops[ch], stop)
			mu.Unlock()
		})
	}
	wg.Wait()
	clients := c.ClientList(t.Context()).Val()
	if n := strings.Count(clients, "sub=") - strings.Count(clients, "sub=0 "); n != 1 {
		t.Errorf("%d connections are subscribed, want 1:\n%s", n, clients)
	}
	for ch, ss := range stops {
		for i, stop := range ss {
			stop()
			stop() // a second call does nothing
			if n, last := numSub(t, c, ch), i == len(ss)-1; (n == 0) != last {
				t.Errorf("after %d of %d stops on %s, NUMSUB = %d", i+1, len(ss), ch, n)
			}
		}
	}
}

// TestMuxWakes: of the waiters that take turns (NewWaiter), a message
// wakes the oldest with no wake-up pending; every listener gets every
// message, with its payload when it has a buffer, and Waiters lists them
// all, oldest first.
func TestMuxWakes(t *testing.T) {
	_, c := server(t)
	m := newMux(t, c)
	turns := []*rediscore.Waiter{rediscore.NewWaiter(), rediscore.NewWaiter(), rediscore.NewWaiter()}
	bare := []*rediscore.Waiter{rediscore.NewListener(0), rediscore.NewListener(0)}
	payloads := rediscore.NewListener(4) // last: when it has a message, so has everyone
	all := append(append(append([]*rediscore.Waiter{}, turns...), bare...), payloads)
	for _, w := range all {
		stop, err := m.Subscribe(t.Context(), "x", w)
		if err != nil {
			t.Fatal(err)
		}
		defer stop()
	}
	if got := m.Waiters("x"); len(got) != len(all) || got[0] != all[0] || got[len(got)-1] != payloads {
		t.Errorf("Waiters = %v, want %v", got, all)
	}
	for _, p := range []string{"one", "two"} {
		if err := c.Publish(t.Context(), "x", p).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{"one", "two"} {
		select {
		case got := <-payloads.Messages():
			if got != want {
				t.Errorf("payload %q, want %q", got, want)
			}
		case <-time.After(bound):
			t.Fatalf("no payload %q within %s", want, bound)
		}
	}
	woken := func(w *rediscore.Waiter) bool {
		select {
		case <-w.C():
			return true
		default:
			return false
		}
	}
	for i, w := range turns {
		if got, want := woken(w), i < 2; got != want {
			t.Errorf("turn-taker %d woken: %v, want %v (two messages wake the two oldest)", i, got, want)
		}
	}
	for i, w := range bare {
		if !woken(w) {
			t.Errorf("listener %d not woken", i)
		}
	}
}

// TestMuxReconnect: when the pub/sub connection is cut, go-redis
// reconnects and subscribes again; that confirmation, which nobody
// awaited, wakes the waiters, since a release may have been missed
// meanwhile; and the channel's messages arrive again.
func TestMuxReconnect(t *testing.T) {
	_, c := server(t)
	m := newMux(t, c)
	turn, listener := rediscore.NewWaiter(), rediscore.NewListener(1)
	for _, w := range []*rediscore.Waiter{turn, listener} {
		stop, err := m.Subscribe(t.Context(), "r", w)
		if err != nil {
			t.Fatal(err)
		}
		defer stop()
	}
	if err := c.Do(t.Context(), "CLIENT", "KILL", "TYPE", "pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-turn.C():
	case <-time.After(bound):
		t.Fatalf("the waiter was not woken within %s of its connection being cut", bound)
	}
	if p := <-listener.Messages(); p != "" {
		t.Errorf("the listener got %q on the resubscription, want an empty payload", p)
	}
	for deadline := time.Now().Add(bound); ; time.Sleep(10 * time.Millisecond) {
		if err := c.Publish(t.Context(), "r", "after").Err(); err != nil {
			t.Fatal(err)
		}
		select {
		case p := <-listener.Messages():
			if p != "after" {
				t.Fatalf("after the reconnect the listener got %q, want \"after\"", p)
			}
			return
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no message within %s of the reconnect", bound)
		}
	}
}

// TestMuxSubscribeFails: a SUBSCRIBE that fails (the server is down) is
// reported to Subscribe at once, not waited out until the caller's
// deadline; once the server is back, the next Subscribe on the channel
// subscribes again.
func TestMuxSubscribeFails(t *testing.T) {
	s, c := server(t)
	m := newMux(t, c)
	s.Kill()
	ctx, cancel := context.WithTimeout(t.Context(), bound)
	defer cancel()
	if stop, err := m.Subscribe(ctx, "f", rediscore.NewWaiter()); err == nil {
		stop()
		t.Fatal("Subscribe with the server down: no error")
	} else if ctx.Err() != nil {
		t.Fatalf("Subscribe with the server down waited out its context: %v", err)
	}
	if n := len(m.Waiters("f")); n != 0 {
		t.Errorf("%d waiters left on the channel after a failed Subscribe", n)
	}
	s.Restart()
	stop, err := m.Subscribe(ctx, "f", rediscore.NewWaiter())
	if err != nil {
		t.Fatalf("Subscribe once the server is back: %v", err)
	}
	defer stop()
	if n := numSub(t, c, "f"); n != 1 {
		t.Errorf("NUMSUB f = %d once the server is back, want 1", n)
	}
}

// TestMuxClose: Close ends the connection and the Mux's goroutines
// (TestMain checks that none is left), a later Watch fails with
// ErrClosed, and a waiter's stop still returns.
func TestMuxClose(t *testing.T) {
	_, c := server(t)
	m := rediscore.NewMux(c, nil)
	stop, err := m.Subscribe(t.Context(), "c", rediscore.NewWaiter())
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	stop()
	if _, err := m.Watch("c", rediscore.NewWaiter()); !errors.Is(err, rediscore.ErrClosed) {
		t.Errorf("Watch after Close: %v, want ErrClosed", err)
	}
	if err := m.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
	if n := numSub(t, c, "c"); n != 0 {
		t.Errorf("NUMSUB c = %d after Close, want 0", n)
	}
}

// TestMuxFresh: the filter given to NewMux drops a message before it
// wakes anyone (Redlock drops the copies of a release that several nodes
// send).
func TestMuxFresh(t *testing.T) {
	_, c := server(t)
	m := rediscore.NewMux(c, func(_, payload string) bool { return payload != "copy" })
	t.Cleanup(func() { _ = m.Close() })
	w := rediscore.NewListener(4)
	stop, err := m.Subscribe(t.Context(), "d", w)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	for _, p := range []string{"copy", "first"} {
		if err := c.Publish(t.Context(), "d", p).Err(); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case p := <-w.Messages():
		if p != "first" {
			t.Errorf("got %q, want the dropped copy skipped and \"first\"", p)
		}
	case <-time.After(bound):
		t.Fatalf("no message within %s", bound)
	}
}

// TestMuxSubscribeOwn: the stop of a waiter's own channel returns without
// waiting for Redis (here paused) to confirm the UNSUBSCRIBE, which still
// takes effect; subscribed again at once, the channel's new waiter gets
// its messages.
func TestMuxSubscribeOwn(t *testing.T) {
	_, c := server(t)
	m := newMux(t, c)
	const ch = "own/1"
	stop, err := m.SubscribeOwn(t.Context(), ch, rediscore.NewWaiter())
	if err != nil {
		t.Fatal(err)
	}
	const pause = 3 * time.Second
	paused := time.Now()
	if err := c.Do(t.Context(), "CLIENT", "PAUSE", pause.Milliseconds(), "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	stop()
	if time.Since(paused) >= pause {
		t.Fatalf("stop returned after %v, once Redis (paused for %v) could answer: it waited for the UNSUBSCRIBE's confirmation", time.Since(paused), pause)
	}
	for deadline := time.Now().Add(bound); numSub(t, c, ch) != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the UNSUBSCRIBE never took effect")
		}
	}
	// Watched again: the SUBSCRIBE follows the UNSUBSCRIBE, and the
	// channel's messages reach its new waiter.
	w := rediscore.NewListener(1)
	stop2, err := m.SubscribeOwn(t.Context(), ch, w)
	if err != nil {
		t.Fatal(err)
	}
	stop3, err := m.SubscribeOwn(t.Context(), ch, rediscore.NewWaiter())
	if err != nil {
		t.Fatal(err)
	}
	stop3()
	stop2()
	stop4, err := m.SubscribeOwn(t.Context(), ch, w)
	if err != nil {
		t.Fatal(err)
	}
	defer stop4()
	if n := numSub(t, c, ch); n != 1 {
		t.Fatalf("NUMSUB %s = %d after leaving and watching again, want 1", ch, n)
	}
	c.Publish(t.Context(), ch, "hello")
	select {
	case msg := <-w.Messages():
		if msg != "hello" {
			t.Errorf("got %q, want hello", msg)
		}
	case <-time.After(bound):
		t.Fatal("the channel's new waiter never got its message")
	}
}

// TestMuxListen: a handler that Listens on a channel twice is added once,
// and is called once, in order, with each message's payload.
func TestMuxListen(t *testing.T) {
	_, c := server(t)
	m := newMux(t, c)
	got := make(chan string, 8)
	h := rediscore.NewHandler(func(payload string) { got <- payload })
	for range 2 {
		conf, err := m.Listen("inbox", h)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-conf.Done():
			if err := conf.Err(); err != nil {
				t.Fatal(err)
			}
		case <-time.After(bound):
			t.Fatal("the SUBSCRIBE was not confirmed")
		}
	}
	if n := len(m.Waiters("inbox")); n != 1 {
		t.Fatalf("%d waiters on the channel after two Listens of one handler, want 1", n)
	}
	for _, p := range []string{"a 1", "b 2"} {
		if err := c.Publish(t.Context(), "inbox", p).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{"a 1", "b 2"} {
		select {
		case p := <-got:
			if p != want {
				t.Fatalf("handler called with %q, want %q", p, want)
			}
		case <-time.After(bound):
			t.Fatalf("handler not called with %q", want)
		}
	}
	select {
	case p := <-got:
		t.Fatalf("handler called again, with %q", p)
	case <-time.After(50 * time.Millisecond):
	}
}
