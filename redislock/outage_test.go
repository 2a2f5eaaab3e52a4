package redislock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	"github.com/redis/go-redis/v9"
)

// An outage must never read as "held": these tests break every step of
// the acquire path on a real server and check that no attempt answers
// "not acquired" or names a holder unless Redis itself said so, and that
// every call returns by its deadline.

// deadlineSlack is how late past its deadline a call may return on a
// loaded 2-core machine (scheduling, not waiting on Redis).
const deadlineSlack = 250 * time.Millisecond

// fault is a go-redis hook that breaks the Nth command sent while armed:
// it fails before sending, stalls until the caller's deadline, or lets
// the command run and then loses its reply.
type fault struct {
	mu     sync.Mutex
	armed  bool
	n, nth int
	kind   string // "fail", "stall", "lost-reply"
}

var errInjected = errors.New("injected: connection reset by peer")

func (f *fault) arm(nth int, kind string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.armed, f.n, f.nth, f.kind = true, 0, nth, kind
}

func (f *fault) disarm() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.armed = false
}

// hit counts a command and reports the fault to apply to it, if any.
func (f *fault) hit() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.armed {
		return ""
	}
	f.n++
	if f.n != f.nth {
		return ""
	}
	return f.kind
}

func (f *fault) DialHook(next redis.DialHook) redis.DialHook { return next }

func (f *fault) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		switch f.hit() {
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

func (f *fault) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// urlClient builds a client the way Open does.
func urlClient(t *testing.T, url string) redis.UniversalClient {
	t.Helper()
	c, _, err := parseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// attemptFn is one acquire path under test: TryAcquire, or the fair
// queue's AcquireWait.
type attemptFn func(ctx context.Context, d *redisDriver, req driver.Request) (driver.Grant, error)

var paths = map[string]attemptFn{
	"try": func(ctx context.Context, d *redisDriver, req driver.Request) (driver.Grant, error) {
		return d.TryAcquire(ctx, req)
	},
	"fair-wait": func(ctx context.Context, d *redisDriver, req driver.Request) (driver.Grant, error) {
		return fairDriver{d}.AcquireWait(ctx, req)
	},
}

// thief is who holds a lock in the "held" cases.
type thief struct {
	owner string
	fence uint64
}

// check runs one attempt with a deadline and judges its outcome: a grant,
// an error without a holder, or (only when held) the true holder.
func check(t *testing.T, what string, fn attemptFn, d *redisDriver, name string, held *thief, deadline time.Duration, after func()) {
	t.Helper()
	defer after()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	req := driver.Request{Name: name, Token: fmt.Sprintf("tok-%d", time.Now().UnixNano()), Owner: "tester", TTL: 10 * time.Second}
	start := time.Now()
	g, err := fn(ctx, d, req)
	took := time.Since(start)
	after()
	if took > deadline+deadlineSlack {
		t.Errorf("%s: returned after %s, deadline %s", what, took.Round(time.Millisecond), deadline)
	}
	switch {
	case g.Acquired && err != nil:
		t.Errorf("%s: acquired AND error %v", what, err)
	case g.Acquired:
		if held != nil {
			t.Errorf("%s: acquired a lock that %s holds", what, held.owner)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = d.Release(ctx, name, req.Token)
	case g.Holder != (driver.Holder{}):
		if held == nil || g.Holder.Owner != held.owner || g.Holder.Fence != held.fence {
			t.Errorf("%s: invented holder %+v (err %v); real holder %+v", what, g.Holder, err, held)
		}
	case err == nil:
		t.Errorf("%s: not acquired, no holder, no error", what)
	}
}

// holdAsThief makes another token hold name; it returns its description.
func holdAsThief(t *testing.T, d *redisDriver, name string) *thief {
	t.Helper()
	req := driver.Request{Name: name, Token: "thief-token", Owner: "thief", TTL: time.Minute}
	g, err := d.TryAcquire(context.Background(), req)
	if err != nil || !g.Acquired {
		t.Fatalf("thief's acquire: %+v, %v", g, err)
	}
	return &thief{owner: "thief", fence: g.Fence}
}

// TestOutageInjected breaks the 1st, 2nd and 3rd command of every acquire
// path, free and held, in every way, on a real server.
func TestOutageInjected(t *testing.T) {
	srv := testserver.Redis(t)
	c := urlClient(t, srv.URL())
	var f fault
	c.AddHook(&f)
	d := testDriver(t, c)
	for pathName, fn := range paths {
		for _, heldCase := range []bool{false, true} {
			for _, kind := range []string{"fail", "stall", "lost-reply"} {
				for nth := 1; nth <= 3; nth++ {
					name := fmt.Sprintf("outage/%s/%v/%s/%d", pathName, heldCase, kind, nth)
					var held *thief
					if heldCase {
						held = holdAsThief(t, d, name)
					}
					f.arm(nth, kind)
					check(t, name, fn, d, name, held, 300*time.Millisecond, f.disarm)
				}
			}
		}
	}
}

// TestOutagePaused freezes the server (SIGSTOP): every acquire path must
// return an error by its deadline, free or held, with a client built from
// a URL and with a caller's plain client (no ContextTimeoutEnabled).
func TestOutagePaused(t *testing.T) {
	t.Run("url-client", func(t *testing.T) { testOutagePaused(t, true) })
	t.Run("plain-client", func(t *testing.T) { testOutagePaused(t, false) })
}

func testOutagePaused(t *testing.T, fromURL bool) {
	srv := testserver.Redis(t)
	var c redis.UniversalClient
	if fromURL {
		c = urlClient(t, srv.URL())
	} else {
		c = redis.NewClient(&redis.Options{Addr: srv.Addr})
		t.Cleanup(func() { _ = c.Close() })
	}
	d := testDriver(t, c)
	held := holdAsThief(t, d, "paused/held")
	srv.Pause()
	defer srv.Resume()
	for pathName, fn := range paths {
		check(t, pathName+"/free", fn, d, "paused/free", nil, 500*time.Millisecond, func() {})
		check(t, pathName+"/held", fn, d, "paused/held", held, 500*time.Millisecond, func() {})
	}
	rctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := d.Refresh(rctx, "paused/held", "thief-token", time.Minute); err == nil {
		t.Error("Refresh on a paused server succeeded")
	}
	if err := d.Release(rctx, "paused/held", "thief-token"); err == nil {
		t.Error("Release on a paused server succeeded")
	}
	if took := time.Since(start); took > 300*time.Millisecond+deadlineSlack {
		t.Errorf("Refresh and Release returned after %s, deadline 300ms", took)
	}
	srv.Resume()
}

// TestOutageKilled kills the server: every acquire path must return an
// error by its deadline.
func TestOutageKilled(t *testing.T) {
	srv := testserver.Redis(t)
	c := urlClient(t, srv.URL())
	d := testDriver(t, c)
	held := holdAsThief(t, d, "killed/held")
	srv.Kill()
	for pathName, fn := range paths {
		check(t, pathName+"/free", fn, d, "killed/free", nil, 500*time.Millisecond, func() {})
		check(t, pathName+"/held", fn, d, "killed/held", held, 500*time.Millisecond, func() {})
	}
}

// TestPermanentErrors: a wrong password and an ACL that forbids EVALSHA
// are permanent; a paused server is not.
func TestPermanentErrors(t *testing.T) {
	srv := testserver.Redis(t, "--requirepass", "s3cret")
	ctx := testCtx(t)
	admin := urlClient(t, "redis://:s3cret@"+srv.Addr)
	if err := admin.Do(ctx, "ACL", "SETUSER", "noeval", "on", ">pw", "~*", "+@all", "-evalsha", "-eval").Err(); err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{
		"wrong password": "redis://:wrong@" + srv.Addr,
		"ACL, no EVAL":   "redis://noeval:pw@" + srv.Addr,
	}
	for what, url := range cases {
		d := testDriver(t, urlClient(t, url))
		req := driver.Request{Name: "perm", Token: "tok", Owner: "me", TTL: time.Second}
		g, err := d.TryAcquire(ctx, req)
		if !errors.Is(err, driver.ErrPermanent) || g.Holder != (driver.Holder{}) {
			t.Errorf("%s: TryAcquire = %+v, %v; want a permanent error", what, g, err)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: the error shows the password", what)
		}
	}
}

// TestURLContextTimeout: clients built from a URL honour context deadlines
// unless the URL says context_timeout_enabled=false (a key go-redis's own
// ParseURL rejects).
func TestURLContextTimeout(t *testing.T) {
	for url, want := range map[string]bool{
		"redis://127.0.0.1:1":                                            true,
		"redis://127.0.0.1:1?context_timeout_enabled=true":               true,
		"redis://127.0.0.1:1?context_timeout_enabled=false":              false,
		"redis://127.0.0.1:1?addr=127.0.0.1:2":                           true,
		"redis://127.0.0.1:1?addr=127.0.0.1:2&context_timeout_enabled=0": false,
	} {
		c, _, err := parseURL(url)
		if err != nil {
			t.Fatalf("%s: %v", url, err)
		}
		if got := honoursDeadlines(c); got != want {
			t.Errorf("%s: ContextTimeoutEnabled = %v, want %v", url, got, want)
		}
		_ = c.Close()
	}
}
