package etcdlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/etcdlock"
	"github.com/dlockdev/dlock/internal/testing/testserver"
)

// The fault tests inject a failure into each step of the acquire path
// (TryAcquire, and AcquireWait queued or not) on real servers, and check
// that no attempt reports the lock as held by someone (Acquired false with
// a nil error, or a holder with the error) when etcd never said so, and
// that every call returns by its context's deadline.

// faultDeadline is the caller's deadline in the fault tests; faultSlack
// is how late a call may return after it (a loaded 2-core machine).
const (
	faultDeadline = 1500 * time.Millisecond
	faultSlack    = time.Second
)

// attempt is one driver call under a fault.
type attempt struct {
	queued bool // AcquireWait instead of TryAcquire
	name   string
}

func (a attempt) String() string {
	if a.queued {
		return "AcquireWait " + a.name
	}
	return "TryAcquire " + a.name
}

// run makes the attempt on drv with the fault deadline and checks that it
// failed without a grant and without a holder, in time.
func (a attempt) run(t *testing.T, drv driver.Driver, ttl time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), faultDeadline)
	defer cancel()
	req := driver.Request{Name: a.name, Token: newToken() + newToken(), Owner: "fault-test", TTL: ttl}
	start := time.Now()
	var g driver.Grant
	var err error
	if a.queued {
		g, err = drv.(driver.Queuer).AcquireWait(ctx, req)
	} else {
		g, err = drv.TryAcquire(ctx, req)
	}
	took := time.Since(start)
	t.Logf("%s: %v after %s", a, err, took.Round(time.Millisecond))
	switch {
	case g.Acquired:
		t.Errorf("%s: granted during the fault (fence %d)", a, g.Fence)
	case err == nil:
		t.Errorf("%s: Acquired=false with no error (holder %+v): an outage read as a conflict", a, g.Holder)
	case g.Holder != (driver.Holder{}):
		t.Errorf("%s: error %v comes with holder %+v that etcd never reported", a, err, g.Holder)
	}
	if took > faultDeadline+faultSlack {
		t.Errorf("%s: returned %s after its %s deadline", a, took-faultDeadline, faultDeadline)
	}
}

// rawDriver opens a Locker on endpoints and returns its driver.
func rawDriver(t *testing.T, election time.Duration, endpoints ...string) driver.Driver {
	return lockerWith(t, election, endpoints...).Driver()
}

// warm takes and releases a lock on drv, so that its shared lease exists.
func warm(t *testing.T, drv driver.Driver, ttl time.Duration) {
	t.Helper()
	req := driver.Request{Name: "warm/" + newToken(), Token: newToken() + newToken(), Owner: "warm", TTL: ttl}
	g, err := drv.TryAcquire(context.Background(), req)
	if err != nil || !g.Acquired {
		t.Fatalf("warm-up acquire: %+v, %v", g, err)
	}
	if err := drv.Release(context.Background(), req.Name, req.Token); err != nil {
		t.Fatalf("warm-up release: %v", err)
	}
}

// holdElsewhere makes another Locker hold name for the rest of the test.
func holdElsewhere(t *testing.T, l *dlock.Locker, name string, ttl time.Duration) {
	t.Helper()
	if _, err := l.Acquire(context.Background(), name, dlock.WithTTL(ttl)); err != nil {
		t.Fatalf("holder: %v", err)
	}
}

// TestFaultFrozen freezes a single etcd member (SIGSTOP) before each step
// of the acquire path: no session yet, a fresh session, a session due for
// renewal, a name held by another Locker, between taking the session and
// the put, and while queued behind a holder (the waiter's lease renewal
// then hangs). With a TTL longer than the wait lease (a waiter's key then
// waits under the wait lease, and moves when granted), and in make
// test-long also with the wait lease's own TTL.
func TestFaultFrozen(t *testing.T) {
	srv := testserver.Etcd(t)
	other := locker(t, srv.Endpoint)
	wait := etcdlock.MinTTLFor(srv.ElectionTimeout)
	for _, ttl := range longOnly([]time.Duration{wait, wait + time.Second}) {
		t.Run(fmt.Sprintf("ttl=%s", ttl), func(t *testing.T) { frozen(t, srv, other, ttl) })
	}
}

func frozen(t *testing.T, srv *testserver.EtcdServer, other *dlock.Locker, ttl time.Duration) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, drv driver.Driver, name string) // runs before the freeze
		hook  string                                             // freeze at this step instead
	}{
		{name: "no-session"},
		{name: "fresh-session", setup: func(t *testing.T, drv driver.Driver, _ string) { warm(t, drv, ttl) }},
		{name: "session-due", setup: func(t *testing.T, drv driver.Driver, _ string) {
			warm(t, drv, ttl)
			time.Sleep(ttl / 6) // past TTL/12: the next acquire renews first
		}},
		{name: "held-elsewhere", setup: func(t *testing.T, drv driver.Driver, name string) {
			warm(t, drv, ttl)
			holdElsewhere(t, other, name, 10*ttl)
		}},
		{name: "after-session", hook: "session"},
		{name: "queued", hook: "wait", setup: func(t *testing.T, drv driver.Driver, name string) {
			holdElsewhere(t, other, name, 10*ttl)
		}},
	} {
		for _, queued := range []bool{false, true} {
			if tc.hook == "wait" && !queued {
				continue
			}
			a := attempt{queued: queued, name: fmt.Sprintf("frozen/%s/%s/%v", ttl, tc.name, queued)}
			t.Run(a.String(), func(t *testing.T) {
				drv := rawDriver(t, srv.ElectionTimeout, srv.Endpoint)
				if tc.setup != nil {
					tc.setup(t, drv, a.name)
				}
				var once sync.Once
				freeze := func() { once.Do(srv.Pause) }
				defer srv.Resume()
				if tc.hook != "" {
					etcdlock.SetStepHook(drv, func(step string) {
						if step == tc.hook {
							freeze()
						}
					})
				} else {
					freeze()
				}
				a.run(t, drv, ttl)
			})
		}
	}
}

// TestFaultFrozenLocker: through the Locker, TryAcquire on a frozen etcd
// for a name nobody holds must not report a holder (the issue's "held by
// an unknown owner, fence 0" came from the portable layer turning the
// context error into an empty HeldError; a holder with an owner or fence
// would come from the driver).
func TestFaultFrozenLocker(t *testing.T) {
	srv := testserver.Etcd(t)
	l := locker(t, srv.Endpoint)
	srv.Pause()
	defer srv.Resume()
	ctx, cancel := context.WithTimeout(context.Background(), faultDeadline)
	defer cancel()
	start := time.Now()
	_, err := l.TryAcquire(ctx, "frozen-locker", dlock.WithTTL(etcdlock.MinTTL))
	took := time.Since(start)
	t.Logf("TryAcquire on a frozen etcd: %v after %s", err, took.Round(time.Millisecond))
	if err == nil {
		t.Fatal("TryAcquire succeeded on a frozen etcd")
	}
	var held *dlock.HeldError
	if errors.As(err, &held) && (held.Owner != "" || held.Fence != 0) {
		t.Errorf("frozen etcd reported as held by %q, fence %d", held.Owner, held.Fence)
	}
	if took > faultDeadline+faultSlack {
		// The portable layer's synchronous clean-up after the deadline
		// (wait.go), not the driver: TestFaultFrozen bounds the driver.
		t.Logf("TryAcquire returned %s after its deadline", took-faultDeadline)
	}
}

// TestFaultQuorumLost kills two members of a 3-member cluster before each
// step of the acquire path (the survivor has no quorum), and between
// steps: after the session is taken, and while queued behind a holder.
func TestFaultQuorumLost(t *testing.T) {
	c := testserver.EtcdCluster(t, 3)
	ttl := etcdlock.MinTTLFor(c.ElectionTimeout)
	other := lockerWith(t, c.ElectionTimeout, c.Endpoints...)
	for _, tc := range []struct {
		name  string
		warm  bool   // take the session before the fault
		held  bool   // another Locker holds the name
		hook  string // kill at this step instead of before the call
		queue bool   // only AcquireWait
	}{
		{name: "no-session"},
		{name: "fresh-session", warm: true},
		{name: "held-elsewhere", warm: true, held: true},
		{name: "after-session", hook: "session"},
		{name: "queued", held: true, hook: "wait", queue: true},
	} {
		for _, queued := range []bool{false, true} {
			if tc.queue && !queued {
				continue
			}
			a := attempt{queued: queued, name: fmt.Sprintf("quorum/%s/%v", tc.name, queued)}
			t.Run(a.String(), func(t *testing.T) {
				waitLeader(t, c)
				drv := rawDriver(t, c.ElectionTimeout, c.Endpoints...)
				if tc.warm {
					warm(t, drv, ttl)
				}
				if tc.held {
					holdElsewhere(t, other, a.name, 10*ttl)
				}
				var once sync.Once
				kill := func() { once.Do(func() { c.Members[1].Kill(); c.Members[2].Kill() }) }
				defer func() { c.Members[1].Start(); c.Members[2].Start() }()
				if tc.hook != "" {
					etcdlock.SetStepHook(drv, func(step string) {
						if step == tc.hook {
							kill()
						}
					})
				} else {
					kill()
				}
				a.run(t, drv, ttl)
			})
		}
	}
}

// TestFaultMemberKilledBetweenSteps kills one member of three (the leader:
// an election follows) between the session and the put. Quorum remains, so
// the attempt may succeed or fail, but a failure must not come with a
// holder, and an attempt on a free name must never say it is held.
func TestFaultMemberKilledBetweenSteps(t *testing.T) {
	c := testserver.EtcdCluster(t, 3)
	ttl := etcdlock.MinTTLFor(c.ElectionTimeout)
	admin := client(t, c.Endpoints...)
	for _, queued := range []bool{false, true} {
		name := fmt.Sprintf("killed-between/%v", queued)
		t.Run(name, func(t *testing.T) {
			waitLeader(t, c)
			leader := leaderOf(t, admin, c)
			drv := rawDriver(t, c.ElectionTimeout, c.Endpoints...)
			var once sync.Once
			etcdlock.SetStepHook(drv, func(step string) {
				if step == "session" {
					once.Do(leader.Kill)
				}
			})
			defer leader.Start()
			ctx, cancel := context.WithTimeout(context.Background(), 2*c.ElectionTimeout+faultDeadline)
			defer cancel()
			req := driver.Request{Name: name, Token: newToken() + newToken(), Owner: "fault-test", TTL: ttl}
			var g driver.Grant
			var err error
			if queued {
				g, err = drv.(driver.Queuer).AcquireWait(ctx, req)
			} else {
				g, err = drv.TryAcquire(ctx, req)
			}
			t.Logf("leader %s killed after the session step: acquired=%v err=%v", leader.Name, g.Acquired, err)
			if !g.Acquired && (err == nil || g.Holder != (driver.Holder{})) {
				t.Errorf("a free name reported held: %+v, %v", g, err)
			}
			if g.Acquired {
				_ = drv.Release(context.Background(), req.Name, req.Token)
			}
		})
	}
}

// waitLeader waits until every member runs and the cluster has a leader.
func waitLeader(t *testing.T, c *testserver.EtcdClusterServer) {
	t.Helper()
	cli := client(t, c.Endpoints...)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok := true
		for _, m := range c.Members {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			st, err := cli.Status(ctx, m.Endpoint)
			cancel()
			ok = ok && err == nil && st.Leader != 0
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("cluster has no leader after 30s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}
