package redislock_test

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/internal/rediscore"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	"github.com/dlockdev/dlock/redislock"
	"github.com/redis/go-redis/v9"
)

// TestInboxOneSubscriptionPerLocker: a Locker's queued waits, several at
// once and round after round, on names another Locker holds, all listen
// on one channel, the Locker's inbox: Redis sees one SUBSCRIBE and no
// UNSUBSCRIBE however many waits there are, no waiter subscribes a
// channel of its own, and each release's hand-off reaches its waiter
// with no attempt after the release. After the first round, when the
// inbox is subscribed, one attempt queues each waiter.
func TestInboxOneSubscriptionPerLocker(t *testing.T) {
	ctx, hook, l, admin, other := inboxPair(t)
	// Both Lockers hold a lease throughout, and so watch for
	// force-releases on a channel of their own (subscribed while a Locker
	// holds leases) from before the count starts to its end.
	for i, lk := range []*dlock.Locker{l, other} {
		ls, err := lk.Acquire(ctx, fmt.Sprintf("inbox/kept/%d", i), dlock.WithTTL(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		defer ls.Release(ctx)
	}
	evicted := keys.Prefix + "evicted"
	waitFor(t, "both Lockers watching for force-releases", func() bool {
		return admin.PubSubNumSub(ctx, evicted).Val()[evicted] == 2
	})
	if err := admin.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	const rounds, together = 3, 4
	for r := range rounds {
		names := make([]string, together)
		holders := make([]*dlock.Lease, together)
		for i := range names {
			names[i] = fmt.Sprintf("inbox/%d/%d", r, i)
			h, err := other.Acquire(ctx, names[i], dlock.WithTTL(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			holders[i] = h
		}
		start := time.Now()
		got := make([]<-chan *dlock.Lease, together)
		for i, name := range names {
			got[i] = acquireLater(t, ctx, l, name)
		}
		for _, name := range names {
			waitQueued(t, admin, name, 1)
		}
		time.Sleep(50 * time.Millisecond) // room for one more attempt, were one sent
		if own := admin.PubSubChannels(ctx, "*:released:*").Val(); len(own) != 0 {
			t.Errorf("round %d: waiters subscribed channels of their own: %v", r, own)
		}
		if inboxes := admin.PubSubChannels(ctx, keys.Inbox("*")).Val(); len(inboxes) != 1 {
			t.Errorf("round %d: inboxes subscribed %v, want one", r, inboxes)
		}
		released := time.Now()
		before := hook.untimed(start)
		if r > 0 && before != together {
			t.Errorf("round %d: %d waits sent %d attempts before the releases, want one each", r, together, before)
		}
		for _, h := range holders {
			if err := h.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		for _, g := range got {
			ls := <-g
			if ls == nil {
				t.FailNow()
			}
			if err := ls.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if after := hook.untimed(released); after != 0 {
			t.Errorf("round %d: %d attempts after the releases, want none (each hand-off told by message)", r, after)
		}
	}
	stats := admin.Info(ctx, "commandstats").Val()
	if n := cmdCalls(stats, "subscribe"); n != 1 {
		t.Errorf("%d SUBSCRIBEs for %d waits, want 1 (the inbox)", n, rounds*together)
	}
	if n := cmdCalls(stats, "unsubscribe"); n != 0 {
		t.Errorf("%d UNSUBSCRIBEs, want none", n)
	}
}

// inboxPair starts a server with two Lockers on it: l, which waits, its
// acquire attempts recorded by hook, and other, which holds, on admin's
// client. Both are closed when t ends.
func inboxPair(t *testing.T) (ctx context.Context, hook *tokenLog, l *dlock.Locker, admin redis.UniversalClient, other *dlock.Locker) {
	srv := testserver.Redis(t)
	c := client(t, srv.Addr)
	hook = &tokenLog{}
	c.AddHook(hook)
	l = lockerWith(t, c, redislock.Config{})
	t.Cleanup(func() { _ = l.Close() })
	admin = client(t, srv.Addr)
	other = locker(t, admin)
	t.Cleanup(func() { _ = other.Close() })
	return ctxT(t), hook, l, admin, other
}

// tokenLog is a go-redis hook that records the acquire script's
// attempts by token, so that a count can leave out a waiter's timed
// renewals of its place (renewal after its previous attempt), which a
// stalled machine may let fall inside the window counted.
type tokenLog struct {
	mu sync.Mutex
	at map[string][]time.Time
}

func (l *tokenLog) DialHook(next redis.DialHook) redis.DialHook { return next }

func (l *tokenLog) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			l.add(cmd)
		}
		return next(ctx, cmds)
	}
}

func (l *tokenLog) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		l.add(cmd)
		return next(ctx, cmd)
	}
}

// add records cmd if it is an acquire attempt: EVALSHA sha numkeys
// KEYS... ARGV..., ARGV[1] the token.
func (l *tokenLog) add(cmd redis.Cmder) {
	a := cmd.Args()
	if len(a) < 4 || (a[1] != redislock.AcquireScript.Hash() && a[0] != "eval") {
		return
	}
	n, ok := a[2].(int)
	if !ok || len(a) <= 3+n {
		return
	}
	tok, _ := a[3+n].(string)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.at == nil {
		l.at = map[string][]time.Time{}
	}
	l.at[tok] = append(l.at[tok], time.Now())
}

// untimed counts the attempts sent after since that were not timed
// renewals: each came sooner than renewal after its token's previous
// attempt, or was its token's first.
func (l *tokenLog) untimed(since time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, times := range l.at {
		for i, at := range times {
			if at.After(since) && (i == 0 || at.Sub(times[i-1]) < renewal) {
				n++
			}
		}
	}
	return n
}

// cmdCalls reads the calls of command cmd from INFO commandstats (0 when
// it was never called).
func cmdCalls(info, cmd string) int {
	m := regexp.MustCompile(`(?m)^cmdstat_` + cmd + `:calls=(\d+)`).FindStringSubmatch(info)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// TestInboxAfterReconnect: when the pub/sub connection drops while a
// waiter waits, go-redis subscribes the inbox again on a new connection,
// and the release's hand-off still reaches the waiter by message, with no
// attempt after the release.
func TestInboxAfterReconnect(t *testing.T) {
	ctx, hook, l, admin, other := inboxPair(t)
	const name = "inbox/reconnect"
	h, err := other.Acquire(ctx, name, dlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	got := acquireLater(t, ctx, l, name)
	waitQueued(t, admin, name, 1)
	head := admin.ZRange(ctx, keys.Queue(name), 0, 0).Val()[0]
	var inbox string
	waitFor(t, "the waiter queued on its inbox", func() bool {
		inbox = admin.HGet(ctx, keys.Asks(name), head+"\n").Val()
		return inbox != "" && admin.PubSubNumSub(ctx, inbox).Val()[inbox] == 1
	})
	if err := admin.ClientKillByFilter(ctx, "TYPE", "pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	waitFor(t, "the inbox subscribed again", func() bool {
		return admin.PubSubNumSub(ctx, inbox).Val()[inbox] == 1
	})
	// The resubscription wakes the waiter, which attempts: a release may
	// have been missed while the connection was down.
	waitFor(t, "the waiter's attempt after the resubscription", func() bool { return hook.untimed(killed) > 0 })
	released := time.Now()
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	ls := <-got
	if ls == nil {
		t.FailNow()
	}
	defer ls.Release(ctx)
	if after := hook.untimed(released); after != 0 {
		t.Errorf("%d attempts after the release, want none (the hand-off told on the inbox)", after)
	}
}

// TestScriptsTellTheInbox: each script that wakes a queued waiter tells a
// waiter whose attempts named an inbox there, its token first, and one
// that named none on a channel of its own, as versions before inboxes
// did: the release (a hand-off), the dequeue of a waiter that was handed
// the lock, a force-release, and the late attempt of a waiter the lock
// was handed to.
func TestScriptsTellTheInbox(t *testing.T) {
	srv := testserver.Redis(t)
	c := client(t, srv.Addr)
	ctx := ctxT(t)
	const inbox = "test:inbox"
	wakes := []struct {
		name string
		run  func(t *testing.T, name string)
		msg  *regexp.Regexp // the message, without the token
	}{
		{"release", func(t *testing.T, name string) {
			ks := []string{keys.Counter(name, false), keys.Lock(name), keys.Queue(name), keys.Deadlines(name), keys.Asks(name), keys.Watched(name)}
			if err := redislock.ReleaseScript.Run(ctx, c, ks, 1000, rediscore.Mark("gone")).Err(); err != nil {
				t.Fatal(err)
			}
		}, regexp.MustCompile(`^p \d+ \d+ 1000$`)},
		{"dequeue", func(t *testing.T, name string) {
			ks := []string{keys.Lock(name), keys.Queue(name), keys.Deadlines(name), keys.Asks(name)}
			if err := redislock.DequeueScript.Run(ctx, c, ks, "gone", keys.Channel(name)).Err(); err != nil {
				t.Fatal(err)
			}
		}, regexp.MustCompile(`^$`)},
		{"force-release", func(t *testing.T, name string) {
			ks := []string{keys.Lock(name), keys.Counter(name, false), keys.Queue(name), keys.LegacyFence(name), keys.Asks(name)}
			if err := redislock.ForceReleaseScript.Run(ctx, c, ks, keys.Channel(name)).Err(); err != nil {
				t.Fatal(err)
			}
		}, regexp.MustCompile(`^$`)},
		{"late-attempt", func(t *testing.T, name string) {
			now, err := c.Time(ctx).Result()
			if err != nil {
				t.Fatal(err)
			}
			past := now.Add(-time.Second).UnixMilli()
			ks := keys.Set(name, false)
			if err := redislock.AcquireScript.Run(ctx, c, ks, "gone", 60000, "host/1", 3000, 1, past, 0).Err(); err != nil {
				t.Fatal(err)
			}
		}, regexp.MustCompile(`^$`)},
	}
	for _, wake := range wakes {
		for _, named := range []string{inbox, ""} {
			t.Run(fmt.Sprintf("%s/inbox=%q", wake.name, named), func(t *testing.T) {
				name := "tell/" + wake.name + "/" + strconv.FormatBool(named != "")
				// The lock held by "gone"; "next" queued behind it, by an
				// attempt that named the inbox (or none).
				c.Set(ctx, keys.Lock(name), "gone\n7\nhost/1", time.Minute)
				args := []any{"next", 60000, "host/2", 3000, 0, 0, 0}
				if named != "" {
					args = append(args, named)
				}
				reply, err := redislock.AcquireScript.Run(ctx, c, keys.Set(name, false), args...).Slice()
				if err != nil || reply[0] != int64(0) {
					t.Fatalf("queueing attempt: %v, %v", reply, err)
				}
				own := keys.WaiterChannel(name, "next")
				sub := c.Subscribe(ctx, inbox, own)
				defer sub.Close()
				for range 2 {
					if _, err := sub.Receive(ctx); err != nil {
						t.Fatal(err)
					}
				}
				wake.run(t, name)
				rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				defer cancel()
				msg, err := sub.ReceiveMessage(rctx)
				if err != nil {
					t.Fatalf("no message for the queued waiter: %v", err)
				}
				wantChannel, payload := own, msg.Payload
				if named != "" {
					wantChannel = inbox
					token, rest, ok := cutSpace(msg.Payload)
					if !ok || token != "next" {
						t.Fatalf("inbox message %q, want the token \"next\" first", msg.Payload)
					}
					payload = rest
				}
				if msg.Channel != wantChannel || !wake.msg.MatchString(payload) {
					t.Fatalf("message %q on %q, want %v on %q", msg.Payload, msg.Channel, wake.msg, wantChannel)
				}
			})
		}
	}
}

func cutSpace(s string) (before, after string, ok bool) {
	for i := range len(s) {
		if s[i] == ' ' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}
