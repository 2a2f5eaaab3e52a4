package redlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dlockdev/dlock/driver"
	"github.com/redis/go-redis/v9"
)

// An outage must never read as "held": these tests break nodes in every
// way during an acquire and check that no attempt answers "not acquired"
// or names a holder unless a majority-deciding set of nodes said so, and
// that every call returns by its deadline.

const deadlineSlack = 250 * time.Millisecond

var errInjected = errors.New("injected: connection reset by peer")

// fault breaks every command sent to one node while armed.
type fault struct {
	mu   sync.Mutex
	kind string // "", "fail", "stall", "lost-reply"
}

func (f *fault) set(kind string) { f.mu.Lock(); f.kind = kind; f.mu.Unlock() }
func (f *fault) get() string     { f.mu.Lock(); defer f.mu.Unlock(); return f.kind }

func (f *fault) DialHook(next redis.DialHook) redis.DialHook { return next }
func (f *fault) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (f *fault) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		switch f.get() {
		case "fail":
			cmd.SetErr(errInjected)
			return errInjected
		case "stall":
			<-ctx.Done()
			cmd.SetErr(ctx.Err())
			return ctx.Err()
		case "lost-reply":
			_ = next(ctx, cmd)
			cmd.SetErr(errInjected)
			return errInjected
		}
		return next(ctx, cmd)
	}
}

// faulty is a driver over ns whose node clients carry a fault hook each.
func faulty(t *testing.T, ns *nodes) (*redlock, []*fault) {
	t.Helper()
	cs := ns.clients(t)
	fs := make([]*fault, len(cs))
	for i, c := range cs {
		fs[i] = &fault{}
		c.AddHook(fs[i])
	}
	drv, err := Config{NodeTimeout: suiteNodeTimeout}.Driver(cs)
	if err != nil {
		t.Fatal(err)
	}
	d := drv.(*redlock)
	t.Cleanup(func() {
		for _, f := range fs {
			f.set("")
		}
		_ = d.Close()
	})
	return d, fs
}

// judge runs one TryAcquire with a deadline: it must be a grant, an error
// without a holder, or (when held is set) the true holder.
func judge(t *testing.T, what string, d *redlock, name string, held string, deadline time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	req := driver.Request{Name: name, Token: fmt.Sprintf("tok-%d", time.Now().UnixNano()), Owner: "tester", TTL: 10 * time.Second}
	start := time.Now()
	g, err := d.TryAcquire(ctx, req)
	if took := time.Since(start); took > deadline+deadlineSlack {
		t.Errorf("%s: returned after %s, deadline %s", what, took.Round(time.Millisecond), deadline)
	}
	switch {
	case g.Acquired && err != nil:
		t.Errorf("%s: acquired AND error %v", what, err)
	case g.Acquired:
		if held != "" {
			t.Errorf("%s: acquired a lock that %s holds", what, held)
		}
		rctx, rcancel := context.WithTimeout(context.Background(), time.Second)
		defer rcancel()
		_ = d.Release(rctx, name, req.Token)
	case g.Holder != (driver.Holder{}):
		if held == "" || g.Holder.Owner != held {
			t.Errorf("%s: invented holder %+v (err %v); real holder %q", what, g.Holder, err, held)
		}
	case err == nil:
		t.Errorf("%s: not acquired, no holder, no error", what)
	}
}

// TestOutageInjected breaks one node, then a majority, in every way, with
// the name free and held (by a thief on a majority).
func TestOutageInjected(t *testing.T) {
	ns := startNodes(t, 3)
	d, fs := faulty(t, ns)
	for _, held := range []bool{false, true} {
		for _, kind := range []string{"fail", "stall", "lost-reply"} {
			for broken := 1; broken <= 2; broken++ {
				name := fmt.Sprintf("outage/%v/%s/%d", held, kind, broken)
				holder := ""
				if held {
					ns.steal(t, name)
					holder = "thief"
				}
				for i := range broken {
					fs[i].set(kind)
				}
				judge(t, name, d, name, holder, 400*time.Millisecond)
				for _, f := range fs {
					f.set("")
				}
			}
		}
	}
}

// TestOutagePausedKilled: a paused majority, then a killed majority.
func TestOutagePausedKilled(t *testing.T) {
	ns := startNodes(t, 3)
	d, _ := faulty(t, ns)
	ns.steal(t, "down/held")
	ns.srv[1].Pause()
	ns.srv[2].Pause()
	judge(t, "paused/free", d, "down/free", "", 500*time.Millisecond)
	judge(t, "paused/held", d, "down/held", "thief", 500*time.Millisecond)
	ns.srv[1].Resume()
	ns.srv[2].Resume()
	ns.srv[0].Kill()
	ns.srv[1].Kill()
	judge(t, "killed/free", d, "down/free", "", 500*time.Millisecond)
	judge(t, "killed/held", d, "down/held", "thief", 500*time.Millisecond)
}
