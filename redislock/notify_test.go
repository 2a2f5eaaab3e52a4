package redislock

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlockdev/dlock/driver"
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
