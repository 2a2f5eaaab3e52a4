package redislock

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/internal/rediscore"
)

// TestWatchSharedConnection: 50 waiters on 5 names share one pub/sub
// connection; each channel is subscribed when Watch returns; a release
// wakes that name's waiters only; the last stop unsubscribes.
func TestWatchSharedConnection(t *testing.T) {
	c := singleClient(t)
	d := testDriver(t, c)
	ctx := testCtx(t)
	var stops []func()
	chans := map[string][]<-chan struct{}{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range 50 {
		name := fmt.Sprintf("watch/%d", i%5)
		wg.Go(func() {
			ch, stop, err := d.Watch(ctx, name)
			if err != nil {
				t.Error(err)
				return
			}
			if n := c.PubSubNumSub(ctx, d.keys.Channel(name)).Val()[d.keys.Channel(name)]; n != 1 {
				t.Errorf("Watch returned before its SUBSCRIBE took effect: NUMSUB = %d", n)
			}
			mu.Lock()
			stops, chans[name] = append(stops, stop), append(chans[name], ch)
			mu.Unlock()
		})
	}
	wg.Wait()
	clients := c.ClientList(ctx).Val()
	if n := strings.Count(clients, "sub=") - strings.Count(clients, "sub=0 "); n != 1 {
		t.Errorf("%d connections are subscribed, want 1:\n%s", n, clients)
	}
	// Each release wakes one waiter of its name that has no wake-up
	// pending: after three releases, three of watch/3's ten are woken.
	for range 3 {
		if _, err := d.TryAcquire(ctx, driver.Request{Name: "watch/3", Token: "t", Owner: "o", TTL: time.Minute}); err != nil {
			t.Fatal(err)
		}
		if err := d.Release(ctx, "watch/3", "t"); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	woken := map[string]int{}
	for time.Now().Before(deadline) && woken["watch/3"] < 3 {
		for name, chs := range chans {
			for _, ch := range chs {
				select {
				case <-ch:
					woken[name]++
				default:
				}
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	for name := range chans {
		if want := map[bool]int{true: 3, false: 0}[name == "watch/3"]; woken[name] != want {
			t.Errorf("%d waiters on %s woken, want %d", woken[name], name, want)
		}
	}
	for _, stop := range stops {
		stop()
	}
	if n := c.PubSubNumSub(ctx, d.keys.Channel("watch/3")).Val()[d.keys.Channel("watch/3")]; n != 0 {
		t.Errorf("after every stop, NUMSUB = %d, want 0", n)
	}
}

// TestReleasePublishesWhileWatched: with nobody queued, a release
// publishes on the release channel only while the name's watched mark is
// set (by Watch, or by a single attempt that found the lock held), so
// that the uncontended release saves the PUBLISH. A sentinel published
// after each release tells "no message" apart from "not yet": Redis
// delivers a channel's messages in order.
func TestReleasePublishesWhileWatched(t *testing.T) {
	c := singleClient(t)
	d := testDriver(t, c)
	ctx := testCtx(t)
	const name = "watched/1"
	channel := d.keys.Channel(name)
	ps := c.Subscribe(ctx, channel)
	t.Cleanup(func() { _ = ps.Close() })
	if _, err := ps.Receive(ctx); err != nil { // the confirmation
		t.Fatal(err)
	}
	// published releases token's lock and reports whether the release
	// published before the sentinel.
	published := func(token string) bool {
		t.Helper()
		if err := d.Release(ctx, name, token); err != nil {
			t.Fatal(err)
		}
		if err := c.Publish(ctx, channel, "sentinel").Err(); err != nil {
			t.Fatal(err)
		}
		m, err := ps.ReceiveMessage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if m.Payload == "sentinel" {
			return false
		}
		if m, err := ps.ReceiveMessage(ctx); err != nil || m.Payload != "sentinel" {
			t.Fatalf("after the release's message: %v, %v; want the sentinel", m, err)
		}
		return true
	}
	// released cycles token through TryAcquire and Release.
	released := func(token string) bool {
		t.Helper()
		if g, err := d.TryAcquire(ctx, driver.Request{Name: name, Token: token, Owner: "o", TTL: time.Minute}); err != nil || !g.Acquired {
			t.Fatalf("TryAcquire: %+v, %v", g, err)
		}
		return published(token)
	}
	if released("a") {
		t.Error("a release with nobody queued or watching published")
	}
	// A single attempt that finds the lock held marks the name.
	if _, err := d.TryAcquire(ctx, driver.Request{Name: name, Token: "h", Owner: "o", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if g, err := d.TryAcquire(ctx, driver.Request{Name: name, Token: "w", Owner: "o", TTL: time.Minute}); err != nil || g.Acquired {
		t.Fatalf("attempt on a held lock: %+v, %v", g, err)
	}
	if ttl := c.PTTL(ctx, d.keys.Watched(name)).Val(); ttl <= 0 || ttl > rediscore.WatchedTTL {
		t.Errorf("watched mark PTTL after a failed attempt = %v, want in (0, %v]", ttl, rediscore.WatchedTTL)
	}
	if !published("h") {
		t.Error("a release after a failed attempt did not publish")
	}
	if !released("b") {
		t.Error("a release while the mark is set did not publish")
	}
	// Watch marks the name too.
	c.Del(ctx, d.keys.Watched(name))
	if released("c") {
		t.Error("a release after the mark was gone published")
	}
	_, stop, err := d.Watch(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if !released("d") {
		t.Error("a release after Watch did not publish")
	}
}
