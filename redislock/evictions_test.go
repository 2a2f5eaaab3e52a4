package redislock

import (
	"testing"
	"time"

	"github.com/dlockdev/dlock/driver"
)

// TestWatchEvictions: the subscription is in place when WatchEvictions
// returns; a ForceRelease by another driver of the same prefix delivers
// the evicted name and fence (a name with spaces and newlines survives);
// a free lock's ForceRelease and another prefix's announce nothing; stop
// unsubscribes and closes the channel.
func TestWatchEvictions(t *testing.T) {
	c := singleClient(t)
	holder, admin := testDriver(t, c), testDriver(t, c)
	ctx := testCtx(t)
	ch, stop, err := holder.WatchEvictions(ctx)
	if err != nil {
		t.Fatalf("WatchEvictions: %v", err)
	}
	channel := holder.evictionChannel()
	if n := c.PubSubNumSub(ctx, channel).Val()[channel]; n != 1 {
		t.Fatalf("WatchEvictions returned before its SUBSCRIBE took effect: NUMSUB %s = %d", channel, n)
	}
	other := testDriver(t, c)
	other.cfg.prefix = "other:"
	other.keys.Prefix = "other:"
	if g, err := other.TryAcquire(ctx, driver.Request{Name: "evict me", Token: "tok", Owner: "o", TTL: time.Minute}); err != nil || !g.Acquired {
		t.Fatalf("TryAcquire under another prefix: %+v, %v", g, err)
	}
	if _, ok, _, err := other.ForceRelease(ctx, "evict me"); err != nil || !ok {
		t.Fatalf("ForceRelease under another prefix = %v, %v", ok, err)
	}
	if _, ok, _, err := admin.ForceRelease(ctx, "free"); err != nil || ok {
		t.Fatalf("ForceRelease(free) = %v, %v; want nothing evicted", ok, err)
	}
	name := "evict me\nnow"
	g, err := holder.TryAcquire(ctx, driver.Request{Name: name, Token: "tok", Owner: "o", TTL: time.Minute})
	if err != nil || !g.Acquired {
		t.Fatalf("TryAcquire(%q): %+v, %v", name, g, err)
	}
	if _, ok, _, err := admin.ForceRelease(ctx, name); err != nil || !ok {
		t.Fatalf("ForceRelease(%q) = %v, %v", name, ok, err)
	}
	select {
	case e := <-ch:
		if e != (driver.Eviction{Name: name, Fence: g.Fence}) {
			t.Errorf("eviction = %+v, want %q with fence %d (and none for the other prefix or the free lock)", e, name, g.Fence)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no eviction delivered within 10s")
	}
	stop()
	if _, open := <-ch; open {
		t.Error("the eviction channel is open after stop")
	}
	// stop sends UNSUBSCRIBE without waiting for the server's reply, so
	// this connection's NUMSUB may run first: wait for it, bounded.
	var n int64
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if n = c.PubSubNumSub(ctx, channel).Val()[channel]; n == 0 {
			return
		}
	}
	t.Errorf("NUMSUB %s = %d for 5s after stop, want 0", channel, n)
}
