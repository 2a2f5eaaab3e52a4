package zklock_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	"github.com/go-zookeeper/zk"
)

// queued waits until name has n contender nodes (holder and waiters).
func queued(t *testing.T, conn *zk.Conn, name string, n int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		children, _, err := conn.Children(lockDir(name))
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			t.Fatal(err)
		}
		if len(children) == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%q has %d contenders after %s, want %d", name, len(children), within, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type grant struct {
	who int
	ls  *dlock.Lease
	err error
}

// watchedPaths asks the server (four-letter word wchp) which paths have
// watches on them.
func watchedPaths(t *testing.T, addr string) []string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("wchp")); err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "/") {
			paths = append(paths, line)
		}
	}
	return paths
}

// TestFIFO: waiters are granted in the order they queued; each watches
// only its predecessor's node (no watch on the lock's znode, one watched
// node per waiter: no herd); a waiter that gives up deletes its node at
// once and does not break the chain.
func TestFIFO(t *testing.T) {
	srv := testserver.ZooKeeper(t)
	admin := connect(t, srv.Addr)
	ctx := context.Background()
	name := "fifo/" + t.Name()
	holder, err := locker(t, srv.Addr).Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	const n = 5
	const quitter = 3 // gives up while queued
	got := make(chan grant, n)
	var cancelQuitter context.CancelFunc
	for i := 1; i <= n; i++ {
		wctx := ctx
		if i == quitter {
			wctx, cancelQuitter = context.WithCancel(ctx)
		}
		l := locker(t, srv.Addr)
		go func() {
			ls, err := l.Acquire(wctx, name, dlock.WithWait(time.Minute))
			got <- grant{i, ls, err}
		}()
		queued(t, admin, name, i+1, 30*time.Second)
	}
	var watched []string
	for deadline := time.Now().Add(10 * time.Second); len(watched) != n && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		watched = watchedPaths(t, srv.Addr)
	}
	if len(watched) != n {
		t.Errorf("watched paths %v, want one predecessor node per waiter (%d)", watched, n)
	}
	for _, p := range watched {
		if p == lockDir(name) {
			t.Errorf("the lock's znode %s is watched: every waiter would wake on every change", p)
		}
	}

	cancelQuitter()
	if g := <-got; g.who != quitter || !errors.Is(g.err, context.Canceled) {
		t.Fatalf("canceled waiter: got waiter %d, err %v; want %d with context.Canceled", g.who, g.err, quitter)
	}
	queued(t, admin, name, n, time.Second) // its node is gone at once
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	var fences []uint64
	for want := 1; want <= n; want++ {
		if want == quitter {
			continue
		}
		g := <-got
		if g.err != nil || g.who != want {
			t.Fatalf("grant %d went to waiter %d (err %v), want waiter %d", len(fences)+1, g.who, g.err, want)
		}
		fences = append(fences, g.ls.Fence())
		if err := g.ls.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i < len(fences); i++ {
		if fences[i] <= fences[i-1] {
			t.Errorf("fences %v do not increase", fences)
		}
	}
}
