package redislock

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlockdev/dlock/driver"
)

// TestHandOffIsProvisional: a release, single or in a batch, hands the
// lock to the queue's head for handoffLease only, and drops the head's
// place; the head's next attempt confirms the grant, with the hand-off's
// fence, and extends it to the head's TTL. A head that died after it
// queued (here: a waiter that queued and never came back) thus keeps the
// lock for handoffLease at most, not for its TTL.
func TestHandOffIsProvisional(t *testing.T) {
	for _, batch := range []bool{false, true} {
		t.Run(map[bool]string{false: "release", true: "batch"}[batch], func(t *testing.T) {
			c := singleClient(t)
			d := testDriver(t, c)
			ctx := testCtx(t)
			const name = "handoff/provisional"
			holder := driver.Request{Name: name, Token: "holder", Owner: "a", TTL: time.Minute}
			waiter := driver.Request{Name: name, Token: "waiter", Owner: "b", TTL: time.Minute}
			if g, err := d.TryAcquire(ctx, holder); err != nil || !g.Acquired {
				t.Fatalf("holder: %+v %v", g, err)
			}
			if g, _, err := d.attempt(ctx, waiter, queuing{placeTTL: placeTTL}); err != nil || g.Acquired {
				t.Fatalf("waiter's first attempt: %+v %v, want queued", g, err)
			}
			var err error
			if batch {
				var res []error
				res, err = d.ReleaseBatch(ctx, []driver.ReleaseItem{{Name: name, Token: holder.Token}})
				if err == nil {
					err = res[0]
				}
			} else {
				err = d.Release(ctx, name, holder.Token)
			}
			if err != nil {
				t.Fatal(err)
			}
			v, _ := c.Get(ctx, d.keys.Lock(name)).Result()
			ttl := c.PTTL(ctx, d.keys.Lock(name)).Val()
			if !strings.HasPrefix(v, waiter.Token+"\n") || ttl <= 0 || ttl > handoffLease {
				t.Fatalf("after the release the lock is %q with %s left, want handed to the waiter for at most %s", v, ttl, handoffLease)
			}
			if n := c.ZCard(ctx, d.keys.Queue(name)).Val(); n != 0 {
				t.Errorf("%d queued after the hand-off, want 0 (the head's place is spent)", n)
			}
			g, _, err := d.attempt(ctx, waiter, queuing{placeTTL: placeTTL})
			if err != nil || !g.Acquired || !strings.HasPrefix(v, waiter.Token+"\n"+itoa(g.Fence)+"\n") {
				t.Fatalf("confirmation: %+v %v, want the hand-off's grant %q", g, err, v)
			}
			if ttl := c.PTTL(ctx, d.keys.Lock(name)).Val(); ttl < 30*time.Second {
				t.Errorf("%s left after the confirmation, want the waiter's TTL (1m)", ttl)
			}
		})
	}
}

func itoa(u uint64) string { return strconv.FormatUint(u, 10) }
