package etcdlock_test

import (
	"context"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/etcdlock"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	"go.uber.org/goleak"
)

// notifyTTL is the TTL of the locks these tests hold: the shortest a
// single-member test server allows.
const notifyTTL = 2 * time.Second

// bareDriver opens an etcd driver, with no Locker around it, on its own
// client to endpoints of a cluster with the given election timeout; it is
// closed when t ends.
func bareDriver(t *testing.T, election time.Duration, endpoints ...string) driver.Driver {
	t.Helper()
	d, err := etcdlock.Config{ElectionTimeout: election}.Driver(client(t, endpoints...))
	if err != nil {
		t.Fatalf("etcdlock.Config.Driver: %v", err)
	}
	t.Cleanup(func() { _ = d.Close() }) // before the client's
	return d
}

// notifier returns d's driver.Notifier, failing t if it has none.
func notifier(t *testing.T, d driver.Driver) driver.Notifier {
	t.Helper()
	n, ok := d.(driver.Notifier)
	if !ok {
		t.Fatalf("%T does not implement driver.Notifier", d)
	}
	return n
}

// hold takes name on d for ttl and returns the token that holds it.
func hold(t *testing.T, d driver.Driver, name string, ttl time.Duration) string {
	t.Helper()
	token := newToken() + newToken()
	g, err := d.TryAcquire(context.Background(), driver.Request{Name: name, Token: token, Owner: "notify-test", TTL: ttl})
	if err != nil || !g.Acquired {
		t.Fatalf("TryAcquire(%q) = %+v, %v; want it acquired", name, g, err)
	}
	return token
}

// unhold frees name held by token on d.
func unhold(t *testing.T, d driver.Driver, name, token string) {
	t.Helper()
	if err := d.Release(context.Background(), name, token); err != nil {
		t.Fatalf("Release(%q): %v", name, err)
	}
}

// watch subscribes to releases of name on n; stop runs when t ends.
func watch(t *testing.T, n driver.Notifier, name string) <-chan struct{} {
	t.Helper()
	ch, stop, err := n.Watch(context.Background(), name)
	if err != nil {
		t.Fatalf("Watch(%q): %v", name, err)
	}
	t.Cleanup(stop)
	return ch
}

// woken reports whether ch receives within d.
func woken(ch <-chan struct{}, d time.Duration) bool {
	select {
	case <-ch:
		return true
	case <-time.After(d):
		return false
	}
}

// returns reports whether f returns within d (f may run on after).
func returns(f func(), d time.Duration) bool {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	return woken(done, d)
}

// watchGoroutines counts the goroutines following a release watch now:
// stop and Close must have ended them when they return (goleak.Find, which
// retries, also allows for the client's own that end a moment later).
func watchGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "etcdlock.(*releaseWatch).run(")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// TestWatchRelease: a release of a held lock wakes a watcher on another
// driver within a second, and nothing wakes it before.
func TestWatchRelease(t *testing.T) {
	srv := testserver.Etcd(t)
	holder := bareDriver(t, testserver.SingleElectionTimeout, srv.Endpoint)
	waiter := bareDriver(t, testserver.SingleElectionTimeout, srv.Endpoint)
	token := hold(t, holder, "released", notifyTTL)
	ch := watch(t, notifier(t, waiter), "released")
	if woken(ch, 200*time.Millisecond) {
		t.Fatal("the watch woke before anything was released")
	}
	unhold(t, holder, "released", token)
	if !woken(ch, time.Second) {
		t.Fatal("the release did not wake the watcher within 1 s")
	}
}

// TestWatchLeaseExpiry: a holder that stops renewing loses its key when
// its lease expires, which wakes the watcher; not before the TTL is
// mostly over.
func TestWatchLeaseExpiry(t *testing.T) {
	srv := testserver.Etcd(t)
	holder := bareDriver(t, testserver.SingleElectionTimeout, srv.Endpoint)
	waiter := bareDriver(t, testserver.SingleElectionTimeout, srv.Endpoint)
	start := time.Now()
	hold(t, holder, "expiring", notifyTTL) // never refreshed, never released
	ch := watch(t, notifier(t, waiter), "expiring")
	if woken(ch, notifyTTL/2-time.Since(start)) {
		t.Fatalf("the watch woke %s after the grant, long before the %s TTL ran out", time.Since(start), notifyTTL)
	}
	if !woken(ch, notifyTTL+3*time.Second) {
		t.Fatalf("the lease's expiry did not wake the watcher within %s of the grant", time.Since(start))
	}
	t.Logf("woken %s after the grant (TTL %s)", time.Since(start).Round(time.Millisecond), notifyTTL)
}

// TestWatchNamesApart: a release of another name wakes no watcher, even
// when one name is a prefix of the other or they differ only after a
// control character; the watched name's own release still does.
func TestWatchNamesApart(t *testing.T) {
	srv := testserver.Etcd(t)
	holder := bareDriver(t, testserver.SingleElectionTimeout, srv.Endpoint)
	n := notifier(t, bareDriver(t, testserver.SingleElectionTimeout, srv.Endpoint))
	for _, tc := range []struct{ watched, other string }{
		{"a", "ab"},
		{"ab", "a"},
		{"a", "a/b"},
		{"jobs\x1fpermit\x1f4\x1f0", "jobs\x1fpermit\x1f4\x1f01"},
		{"jobs\x1fpermit\x1f4\x1f0", "jobs\x1fpermit\x1f4"},
	} {
		watchedToken := hold(t, holder, tc.watched, notifyTTL)
		otherToken := hold(t, holder, tc.other, notifyTTL)
		ch := watch(t, n, tc.watched)
		unhold(t, holder, tc.other, otherToken)
		if woken(ch, 300*time.Millisecond) {
			t.Errorf("releasing %q woke the watcher of %q", tc.other, tc.watched)
		}
		unhold(t, holder, tc.watched, watchedToken)
		if !woken(ch, time.Second) {
			t.Errorf("releasing %q did not wake its watcher within 1 s", tc.watched)
		}
	}
}

// TestWatchStopLeavesNoGoroutine: stop, and the driver's Close for a
// watch never stopped, end every goroutine the watch started; stop after
// Close returns at once.
func TestWatchStopLeavesNoGoroutine(t *testing.T) {
	srv := testserver.Etcd(t)
	d, err := etcdlock.Config{ElectionTimeout: testserver.SingleElectionTimeout}.Driver(client(t, srv.Endpoint))
	if err != nil {
		t.Fatalf("etcdlock.Config.Driver: %v", err)
	}
	var closing atomic.Bool // Close is called once, and a hung one not waited for twice
	closeDriver := func() {
		if closing.CompareAndSwap(false, true) {
			_ = d.Close()
		}
	}
	t.Cleanup(closeDriver) // if the test ends before it closes d
	n := notifier(t, d)
	// A first watch makes the client connect: its transport goroutines
	// are the client's, and outlive any watch.
	_, warm, err := n.Watch(context.Background(), "warm")
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	if !returns(warm, time.Second) {
		t.Fatal("stop did not return within 1 s")
	}
	before := goleak.IgnoreCurrent()
	_, stop, err := n.Watch(context.Background(), "stopped")
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	left := -1
	if !returns(func() { stop(); left = watchGoroutines() }, time.Second) {
		t.Fatal("stop did not return within 1 s")
	}
	if left != 0 {
		t.Fatalf("%d release watch goroutines still ran when stop returned", left)
	}
	if err := goleak.Find(before); err != nil {
		t.Fatalf("goroutines left after stop: %v", err)
	}

	_, stop, err = n.Watch(context.Background(), "closed")
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	left = -1
	if !returns(func() { closeDriver(); left = watchGoroutines() }, 5*time.Second) {
		t.Fatal("Close with a watch not stopped did not return within 5 s")
	}
	if left != 0 {
		t.Fatalf("%d release watch goroutines still ran when Close returned", left)
	}
	if err := goleak.Find(before); err != nil {
		t.Fatalf("goroutines left after Close: %v", err)
	}
	if !returns(stop, time.Second) {
		t.Fatal("stop after Close did not return within 1 s")
	}
	if _, _, err := n.Watch(context.Background(), "late"); err == nil {
		t.Error("Watch after Close succeeded")
	}
}

// TestWatchLeaderLoss: when the member a watcher talks to loses its
// leader, etcd ends the watch; the watcher is woken rather than left
// silent, and once the cluster has a leader again the watch is back and a
// release wakes it. The client knows only that member, so nothing else
// can serve it.
func TestWatchLeaderLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a 3-member cluster to lose and regain its leader")
	}
	c := testserver.EtcdCluster(t, 3)
	watched, others := c.Members[0], c.Members[1:]
	holder := bareDriver(t, c.ElectionTimeout, c.Endpoints...)
	token := hold(t, holder, "leaderless", etcdlock.MinTTLFor(c.ElectionTimeout)*4)
	ch := watch(t, notifier(t, bareDriver(t, c.ElectionTimeout, watched.Endpoint)), "leaderless")

	for _, m := range others {
		m.Stop()
	}
	lost := time.Now()
	if !woken(ch, 10*c.ElectionTimeout) {
		t.Fatalf("no wake within %s of the watched member losing its quorum", 10*c.ElectionTimeout)
	}
	t.Logf("woken %s after quorum loss", time.Since(lost).Round(time.Millisecond))
	for _, m := range others {
		m.Start()
	}
	waitLeader(t, c)
	// The watch is made again once there is a leader, and wakes the
	// watcher then too: wait for that, so that the release below is seen
	// by the new watch, not confused with the re-watch's wake.
	if !woken(ch, 10*c.ElectionTimeout) {
		t.Fatal("no wake when the watch was made again")
	}
	unhold(t, holder, "leaderless", token)
	if !woken(ch, 2*time.Second) {
		t.Fatal("a release after the leader came back did not wake the watcher within 2 s")
	}
}
