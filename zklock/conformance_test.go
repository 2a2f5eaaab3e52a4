package zklock_test

import (
	"context"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/dlocktest"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	"github.com/dlockdev/dlock/zklock"
	"github.com/go-zookeeper/zk"
)

// sessionTimeout is the tests' session timeout: short, so that losses
// show quickly, and well above a loaded machine's hiccups.
const sessionTimeout = 4 * time.Second

// childSessionTimeout is the session timeout of the suite's child
// processes: a SIGKILLed holder's lock is freed when its session expires,
// which the suite expects within its TTL and a margin.
const childSessionTimeout = 2 * time.Second

func TestConformance(t *testing.T) {
	srv := testserver.ZooKeeper(t)
	admin := connect(t, srv.Addr)
	dlocktest.Run(t, dlocktest.Harness{
		New:          func(t testing.TB) *dlock.Locker { return locker(t, srv.Addr) },
		URL:          srv.URL() + "?session_timeout=" + childSessionTimeout.String(),
		TTL:          2 * time.Second,
		Expire:       func(t testing.TB, name string) { expire(t, admin, name) },
		Steal:        func(t testing.TB, name string) { steal(t, admin, name) },
		NewStoppable: newStoppable,
		SessionBound: true,
		Provides: []dlocktest.Capability{dlocktest.Notifier, dlocktest.Queuer, dlocktest.Lister,
			dlocktest.ForceReleaser, dlocktest.Diagnoser, dlocktest.Describer, dlocktest.SettingsReporter,
			dlocktest.LogSetter, dlocktest.Ledger},
		Lacks: map[dlocktest.Capability]string{
			dlocktest.BatchRefresher:    "a node lives as long as its session: a refresh checks the session, with no call per lease",
			dlocktest.BatchReleaser:     "ZooKeeper deletes one node per call; Close ends the session, which deletes them all",
			dlocktest.EvictionWatcher:   "a force-release deletes the holder's node, which its own watch reports",
			dlocktest.SessionWatcher:    "the session's end reaches every lease through the watchdog's session check",
			dlocktest.Migrator:          "the root node is created at open",
			dlocktest.MigrationReporter: "the root node is created at open",
			dlocktest.Adopter: "a lock is an ephemeral node of the session that created it: adopting it would " +
				"take over that session (its id and password), and with it every lock the session holds",
		},
	})
}

// connect opens a session on addrs, waits until it is established, and
// closes it when t ends.
func connect(t testing.TB, addrs ...string) *zk.Conn {
	t.Helper()
	conn, _, err := zk.Connect(addrs, sessionTimeout, zk.WithLogInfo(false), zk.WithLogger(quiet{}))
	if err != nil {
		t.Fatalf("zk.Connect: %v", err)
	}
	t.Cleanup(conn.Close)
	deadline := time.Now().Add(30 * time.Second)
	for conn.State() != zk.StateHasSession {
		if time.Now().After(deadline) {
			t.Fatalf("no ZooKeeper session with %v: %s", addrs, conn.State())
		}
		time.Sleep(10 * time.Millisecond)
	}
	return conn
}

type quiet struct{}

func (quiet) Printf(string, ...any) {}

// locker opens a Locker on its own session.
func locker(t testing.TB, addrs ...string) *dlock.Locker {
	t.Helper()
	l, err := zklock.Config{SessionTimeout: sessionTimeout}.Locker(connect(t, addrs...))
	if err != nil {
		t.Fatalf("zklock.Config.Locker: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() }) // before the session's (cleanups run last-in first-out)
	return l
}

func newStoppable(t testing.TB) (*dlock.Locker, func()) {
	srv := testserver.ZooKeeper(t)
	return locker(t, srv.Addr), srv.Stop
}

// lockDir is name's znode under the default root, escaped as the
// package does.
func lockDir(name string) string {
	return zklock.DefaultRoot + "/" + strings.ReplaceAll(url.PathEscape(name), "/", "%2F")
}

// headNode returns the path of name's first contender.
func headNode(t testing.TB, conn *zk.Conn, name string) string {
	t.Helper()
	children, _, err := conn.Children(lockDir(name))
	if err != nil {
		t.Fatalf("children of %q: %v", name, err)
	}
	if len(children) == 0 {
		t.Fatalf("no contender for %q", name)
	}
	slices.SortFunc(children, func(a, b string) int { return strings.Compare(a[len(a)-10:], b[len(b)-10:]) })
	return lockDir(name) + "/" + children[0]
}

// expire deletes the holder's node, as its session's end would.
func expire(t testing.TB, conn *zk.Conn, name string) {
	t.Helper()
	if err := conn.Delete(headNode(t, conn, name), -1); err != nil {
		t.Fatalf("delete holder of %q: %v", name, err)
	}
}

// steal deletes the holder's node and puts a foreign contender (of the
// admin session) first in its place.
func steal(t testing.TB, conn *zk.Conn, name string) {
	t.Helper()
	head := headNode(t, conn, name)
	ops := []any{
		&zk.DeleteRequest{Path: head, Version: -1},
		&zk.CreateRequest{Path: lockDir(name) + "/thief-lock-", Data: []byte("thief"), Acl: zk.WorldACL(zk.PermAll), Flags: zk.FlagEphemeralSequential},
	}
	if _, err := conn.Multi(ops...); err != nil {
		t.Fatalf("steal %q: %v", name, err)
	}
}

var _ = context.Background
