package zklock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	"github.com/dlockdev/dlock/zklock"
	"github.com/go-zookeeper/zk"
	"go.uber.org/goleak"
)

// bareDriver is a driver on its own session, closed when t ends.
func bareDriver(t testing.TB, conn *zk.Conn) driver.Driver {
	t.Helper()
	d, err := zklock.Config{SessionTimeout: sessionTimeout}.Driver(conn)
	if err != nil {
		t.Fatalf("zklock.Config.Driver: %v", err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// notifier is d as a driver.Notifier.
func notifier(t testing.TB, d driver.Driver) driver.Notifier {
	t.Helper()
	n, ok := d.(driver.Notifier)
	if !ok {
		t.Fatalf("%T does not implement driver.Notifier", d)
	}
	return n
}

// watch subscribes n to name's releases and stops it when t ends.
func watch(t testing.TB, n driver.Notifier, name string) <-chan struct{} {
	t.Helper()
	ch, stop, err := n.Watch(context.Background(), name)
	if err != nil {
		t.Fatalf("Watch(%q): %v", name, err)
	}
	t.Cleanup(stop)
	return ch
}

// hold takes name on d for a fresh token and returns the token.
func hold(t testing.TB, d driver.Driver, name string) string {
	t.Helper()
	req := driver.Request{Name: name, Token: newToken(), Owner: "test", TTL: sessionTimeout}
	g, err := d.TryAcquire(context.Background(), req)
	if err != nil || !g.Acquired {
		t.Fatalf("TryAcquire(%q) = %+v, %v; want it acquired", name, g, err)
	}
	return req.Token
}

// woken reports whether ch receives within d.
func woken(ch <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	}
}

// drain empties a pending wake from ch.
func drain(ch <-chan struct{}) {
	select {
	case <-ch:
	default:
	}
}

// TestWatchRelease: a release of the watched name wakes its watcher within
// a second; a release of another name does not. Names with the control
// character the portable layer builds keys with ("\x1f") are escaped into
// one znode and watched like any other.
func TestWatchRelease(t *testing.T) {
	srv := testserver.ZooKeeper(t)
	holder := bareDriver(t, connect(t, srv.Addr))
	n := notifier(t, bareDriver(t, connect(t, srv.Addr)))
	admin := connect(t, srv.Addr)
	ctx := context.Background()
	for _, tc := range []struct{ watched, other string }{
		{"release/a", "release/b"},
		{"jobs\x1fpermit\x1f4\x1f0", "jobs\x1fpermit\x1f4\x1f1"},
	} {
		watchedTok, otherTok := hold(t, holder, tc.watched), hold(t, holder, tc.other)
		// The driver made the escaped znode, with no control character left.
		if ok, _, err := admin.Exists(lockDir(tc.watched)); err != nil || !ok || strings.ContainsRune(lockDir(tc.watched), 0x1f) {
			t.Fatalf("%q: znode %s exists = %v, %v", tc.watched, lockDir(tc.watched), ok, err)
		}
		ch := watch(t, n, tc.watched)
		if err := holder.Release(ctx, tc.other, otherTok); err != nil {
			t.Fatal(err)
		}
		if woken(ch, 300*time.Millisecond) {
			t.Errorf("releasing %q woke the watcher of %q", tc.other, tc.watched)
		}
		if err := holder.Release(ctx, tc.watched, watchedTok); err != nil {
			t.Fatal(err)
		}
		if !woken(ch, time.Second) {
			t.Errorf("releasing %q did not wake its watcher within 1 s", tc.watched)
		}
	}
}

// TestWatchHolderGone: the watcher wakes when the holder's node goes
// without a release: its session closed, its session expired (the holder
// cut off from ZooKeeper past its session timeout), a force-release.
func TestWatchHolderGone(t *testing.T) {
	srv := testserver.ZooKeeper(t)
	d := bareDriver(t, connect(t, srv.Addr))
	n := notifier(t, d)
	ctx := context.Background()

	t.Run("session closed", func(t *testing.T) {
		conn := connect(t, srv.Addr)
		hold(t, bareDriver(t, conn), t.Name())
		ch := watch(t, n, t.Name())
		conn.Close()
		if !woken(ch, time.Second) {
			t.Error("the holder's session closed: watcher not woken within 1 s")
		}
	})
	t.Run("session expired", func(t *testing.T) {
		const timeout = 2 * time.Second
		p := newProxy(t, srv.Addr)
		_, conn := lockerOn(t, timeout, p.Addr())
		hold(t, bareDriver(t, conn), t.Name())
		ch := watch(t, n, t.Name())
		p.Cut()
		cut := time.Now()
		if woken(ch, timeout/2) {
			t.Fatal("watcher woken while the cut-off holder's session still lives")
		}
		if !woken(ch, 2*timeout+time.Second) {
			t.Fatalf("the holder's session expired: watcher not woken %s after the cut", time.Since(cut).Round(time.Millisecond))
		}
		t.Logf("woken %s after the cut (session timeout %s)", time.Since(cut).Round(time.Millisecond), timeout)
	})
	t.Run("force-released", func(t *testing.T) {
		hold(t, bareDriver(t, connect(t, srv.Addr)), t.Name())
		ch := watch(t, n, t.Name())
		if _, ok, _, err := d.(driver.ForceReleaser).ForceRelease(ctx, t.Name()); err != nil || !ok {
			t.Fatalf("ForceRelease = %v, %v", ok, err)
		}
		if !woken(ch, time.Second) {
			t.Error("force-release: watcher not woken within 1 s")
		}
	})
}

// TestWatchIgnoresFailedAttempts: other waiters' failed attempts (each
// creates a node behind the holder's and deletes it) wake nobody, so that
// waiters do not wake one another in turn while the lock stays held; the
// release that follows does.
func TestWatchIgnoresFailedAttempts(t *testing.T) {
	srv := testserver.ZooKeeper(t)
	holder := bareDriver(t, connect(t, srv.Addr))
	other := bareDriver(t, connect(t, srv.Addr))
	n := notifier(t, bareDriver(t, connect(t, srv.Addr)))
	ctx := context.Background()
	name := t.Name()
	tok := hold(t, holder, name)
	ch := watch(t, n, name)
	for range 10 {
		g, err := other.TryAcquire(ctx, driver.Request{Name: name, Token: newToken(), Owner: "other", TTL: sessionTimeout})
		if err != nil || g.Acquired {
			t.Fatalf("TryAcquire while held = %+v, %v; want not acquired", g, err)
		}
	}
	if woken(ch, 300*time.Millisecond) {
		t.Error("failed attempts of another waiter woke the watcher while the lock stayed held")
	}
	if err := holder.Release(ctx, name, tok); err != nil {
		t.Fatal(err)
	}
	if !woken(ch, time.Second) {
		t.Error("release after failed attempts: watcher not woken within 1 s")
	}
}

// TestWatchNeverHeld: a name nobody ever held has no znode; the watch
// waits for it to appear, then follows its contenders like any other.
func TestWatchNeverHeld(t *testing.T) {
	srv := testserver.ZooKeeper(t)
	holder := bareDriver(t, connect(t, srv.Addr))
	n := notifier(t, bareDriver(t, connect(t, srv.Addr)))
	admin := connect(t, srv.Addr)
	name := t.Name()
	if ok, _, err := admin.Exists(lockDir(name)); err != nil || ok {
		t.Fatalf("znode %s exists = %v, %v before anyone held it", lockDir(name), ok, err)
	}
	ch := watch(t, n, name)
	if ok, _, err := admin.Exists(lockDir(name)); err != nil || ok {
		t.Errorf("Watch created the znode %s (exists = %v, %v)", lockDir(name), ok, err)
	}
	tok := hold(t, holder, name)
	time.Sleep(100 * time.Millisecond) // the watch moves to the new znode's children
	drain(ch)                          // a wake for the read that found it empty is allowed
	if err := holder.Release(context.Background(), name, tok); err != nil {
		t.Fatal(err)
	}
	if !woken(ch, time.Second) {
		t.Error("release of a name first held after Watch: watcher not woken within 1 s")
	}
}

// TestWatchConnectionLost: the watcher's own connection dropping wakes it
// (its waiter looks again), and so does the connection coming back; the
// watch, set again by the client on its surviving session, still wakes
// it on the next release.
func TestWatchConnectionLost(t *testing.T) {
	srv := testserver.ZooKeeper(t)
	p := newProxy(t, srv.Addr)
	_, conn := lockerOn(t, 8*time.Second, p.Addr())
	holder := bareDriver(t, connect(t, srv.Addr))
	n := notifier(t, bareDriver(t, conn))
	name := t.Name()
	tok := hold(t, holder, name)
	ch := watch(t, n, name)
	session := conn.SessionID()
	p.Cut()
	if !woken(ch, time.Second) {
		t.Fatal("the watcher's connection dropped: not woken within 1 s")
	}
	p.Restore()
	if !woken(ch, 5*time.Second) {
		t.Fatal("the watcher's connection came back: not woken within 5 s")
	}
	if conn.SessionID() != session {
		t.Fatal("the session changed: the test needs it to survive")
	}
	if woken(ch, 300*time.Millisecond) {
		t.Error("woken again with the lock still held and the connection up")
	}
	if err := holder.Release(context.Background(), name, tok); err != nil {
		t.Fatal(err)
	}
	if !woken(ch, time.Second) {
		t.Error("release after a reconnect: watcher not woken within 1 s")
	}
}

// TestWatchStopLeavesNoGoroutine: stop, and the driver's Close for a
// watch never stopped, end every goroutine the watch started; stop after
// Close returns at once, and Watch after Close fails.
func TestWatchStopLeavesNoGoroutine(t *testing.T) {
	srv := testserver.ZooKeeper(t)
	holder := bareDriver(t, connect(t, srv.Addr))
	d, err := zklock.Config{SessionTimeout: sessionTimeout}.Driver(connect(t, srv.Addr)) // closed below
	if err != nil {
		t.Fatal(err)
	}
	n := notifier(t, d)
	hold(t, holder, "held")
	before := goleak.IgnoreCurrent()
	for _, name := range []string{"held", "never-held"} {
		_, stop, err := n.Watch(context.Background(), name)
		if err != nil {
			t.Fatalf("Watch(%q): %v", name, err)
		}
		stop()
		if err := goleak.Find(before); err != nil {
			t.Fatalf("goroutines left after stopping the watch of %q: %v", name, err)
		}
	}

	_, stop, err := n.Watch(context.Background(), "held")
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	if err := d.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := goleak.Find(before); err != nil {
		t.Fatalf("goroutines left after Close: %v", err)
	}
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	if !woken(stopped, time.Second) {
		t.Fatal("stop after Close did not return within 1 s")
	}
	if _, _, err := n.Watch(context.Background(), "late"); err == nil {
		t.Error("Watch after Close succeeded")
	}
}

// TestWatchCanceled: a Watch whose context is already done fails rather
// than returning a subscription that was never set.
func TestWatchCanceled(t *testing.T) {
	srv := testserver.ZooKeeper(t)
	n := notifier(t, bareDriver(t, connect(t, srv.Addr)))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := n.Watch(ctx, t.Name()); !errors.Is(err, context.Canceled) {
		t.Errorf("Watch on a canceled context = %v, want context.Canceled", err)
	}
}
