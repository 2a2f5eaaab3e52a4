package zklock_test

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	"github.com/dlockdev/dlock/zklock"
	"github.com/go-zookeeper/zk"
)

// proxy forwards TCP connections to a server and can cut them all and
// refuse new ones, to partition a client from ZooKeeper.
type proxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	conns   map[net.Conn]bool
	blocked bool
	wg      sync.WaitGroup
}

func newProxy(t testing.TB, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target, conns: map[net.Conn]bool{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		_ = ln.Close()
		p.Cut()
		p.wg.Wait()
	})
	return p
}

func (p *proxy) Addr() string { return p.ln.Addr().String() }

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		blocked := p.blocked
		p.mu.Unlock()
		if blocked {
			_ = c.Close()
			continue
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.track(c, s)
		p.wg.Add(2)
		go p.pipe(c, s)
		go p.pipe(s, c)
	}
}

func (p *proxy) track(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		p.conns[c] = true
	}
}

func (p *proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	_, _ = io.Copy(dst, src)
	_ = dst.Close()
	_ = src.Close()
}

// Cut closes every forwarded connection and refuses new ones.
func (p *proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blocked = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.conns = map[net.Conn]bool{}
}

// Restore accepts connections again.
func (p *proxy) Restore() {
	p.mu.Lock()
	p.blocked = false
	p.mu.Unlock()
}

// lockerOn opens a Locker on its own session with the given timeout.
func lockerOn(t testing.TB, timeout time.Duration, addr string) (*dlock.Locker, *zk.Conn) {
	t.Helper()
	conn, _, err := zk.Connect([]string{addr}, timeout, zk.WithLogInfo(false), zk.WithLogger(quiet{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	for deadline := time.Now().Add(30 * time.Second); conn.State() != zk.StateHasSession; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no session: %s", conn.State())
		}
	}
	l, err := zklock.Config{SessionTimeout: timeout}.Locker(conn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l, conn
}

// TestSessionIsTheLease: a disconnect the session survives loses nothing;
// a partition longer than the session timeout ends the lease (Done closes
// with ErrLost) before ZooKeeper expires the session and grants the lock
// to anyone else; once reconnected, the Locker works on its new session.
func TestSessionIsTheLease(t *testing.T) {
	const timeout = 8 * time.Second
	srv := testserver.ZooKeeper(t)
	p := newProxy(t, srv.Addr)
	l, conn := lockerOn(t, timeout, p.Addr())
	ctx := context.Background()
	name := "session/" + t.Name()
	ls, err := l.Acquire(ctx, name, dlock.WithTTL(timeout))
	if err != nil {
		t.Fatal(err)
	}
	session := conn.SessionID()

	// A short disconnect: the session and the lease survive it.
	p.Cut()
	time.Sleep(700 * time.Millisecond)
	p.Restore()
	select {
	case <-ls.Done():
		t.Fatalf("lease lost after a 700ms disconnect (session timeout %s): %v", timeout, ls.Err())
	case <-time.After(timeout):
	}
	if conn.SessionID() != session {
		t.Fatalf("session changed after a short disconnect")
	}
	other := locker(t, srv.Addr)
	if _, err := other.TryAcquire(ctx, name); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryAcquire while held after a short disconnect = %v, want ErrNotAcquired", err)
	}

	// A partition longer than the session timeout: the holder hears of
	// the loss first, and only then can someone else be granted.
	p.Cut()
	cut := time.Now()
	granted := make(chan *dlock.Lease, 1)
	go func() {
		l2, err := other.Acquire(ctx, name, dlock.WithWait(3*timeout))
		if err != nil {
			t.Errorf("contender: %v", err)
		}
		granted <- l2
	}()
	select {
	case <-ls.Done():
		t.Logf("holder told after %s: %v", time.Since(cut).Round(time.Millisecond), ls.Err())
	case l2 := <-granted:
		t.Fatalf("contender granted (fence %d) %s into the partition while the holder still believed it held the lock", l2.Fence(), time.Since(cut))
	case <-time.After(timeout):
		t.Fatalf("lease not lost %s into a partition (session timeout %s)", timeout, timeout)
	}
	if !errors.Is(ls.Err(), dlock.ErrLost) {
		t.Errorf("Err = %v, want ErrLost", ls.Err())
	}
	l2 := <-granted
	if l2 == nil {
		t.FailNow()
	}
	t.Logf("contender granted %s after the cut, fence %d > %d", time.Since(cut).Round(time.Millisecond), l2.Fence(), ls.Fence())
	if l2.Fence() <= ls.Fence() {
		t.Errorf("fence %d after the session expired is not above %d", l2.Fence(), ls.Fence())
	}
	_ = l2.Release(ctx)

	// Reconnected, the client finds its session expired and starts a new
	// one, on which the same Locker works.
	p.Restore()
	ls3, err := l.Acquire(ctx, name, dlock.WithTTL(timeout), dlock.WithWait(3*timeout))
	if err != nil {
		t.Fatalf("Acquire after the session expired: %v", err)
	}
	if conn.SessionID() == session {
		t.Errorf("the session did not change")
	}
	_ = ls3.Release(ctx)
}

// TestLostCreateReply: a create whose reply is lost (the connection is
// cut while the paused server holds the request, which it applies when it
// resumes) is found again by its protected name after the reconnect, and
// no phantom node is left in the queue while the session lives.
func TestLostCreateReply(t *testing.T) {
	srv := testserver.ZooKeeper(t)
	p := newProxy(t, srv.Addr)
	l, conn := lockerOn(t, 8*time.Second, p.Addr())
	admin := connect(t, srv.Addr)
	ctx := context.Background()
	name := "lost-reply/" + t.Name()
	warm, err := l.Acquire(ctx, name) // creates the lock's znode
	if err != nil {
		t.Fatal(err)
	}
	if err := warm.Release(ctx); err != nil {
		t.Fatal(err)
	}
	session := conn.SessionID()

	srv.Pause()
	type result struct {
		ls  *dlock.Lease
		err error
	}
	got := make(chan result, 1)
	go func() {
		ls, err := l.TryAcquire(ctx, name)
		got <- result{ls, err}
	}()
	time.Sleep(300 * time.Millisecond) // the create is in the paused server's socket
	p.Cut()
	time.Sleep(200 * time.Millisecond)
	p.Restore()
	srv.Resume()
	r := <-got
	if conn.SessionID() != session {
		t.Fatalf("the session changed; the test needs it to survive")
	}
	children, _, err := admin.Children(lockDir(name))
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		t.Fatal(err)
	}
	switch {
	case r.err == nil:
		t.Logf("the create was applied and its node found again: fence %d, nodes %v", r.ls.Fence(), children)
		if len(children) != 1 {
			t.Errorf("queue holds %v, want only the holder's node", children)
		}
		if err := r.ls.Release(ctx); err != nil {
			t.Fatal(err)
		}
	default:
		// The server applies the create when it resumes, a second before
		// the client's reconnect reads the queue: the node must be found.
		t.Errorf("TryAcquire after a lost create reply: %v (nodes %v), want the node found again", r.err, children)
	}
	// No phantom: the name is free for others at once, with the session alive.
	ls, err := locker(t, srv.Addr).Acquire(ctx, name, dlock.WithWait(3*time.Second))
	if err != nil {
		t.Fatalf("phantom: the lock is not free after the lost reply: %v", err)
	}
	_ = ls.Release(ctx)
}

// TestCreateAnsweredAfterDeadline: a create the server applies after its
// caller's deadline (the server paused) is deleted as soon as its reply
// arrives, instead of staying queued until the session ends.
func TestCreateAnsweredAfterDeadline(t *testing.T) {
	srv := testserver.ZooKeeper(t)
	l, conn := lockerOn(t, 8*time.Second, srv.Addr)
	admin := connect(t, srv.Addr)
	ctx := context.Background()
	name := "late/" + t.Name()
	warm, err := l.Acquire(ctx, name) // creates the lock's znode
	if err != nil {
		t.Fatal(err)
	}
	if err := warm.Release(ctx); err != nil {
		t.Fatal(err)
	}
	session := conn.SessionID()
	srv.Pause()
	start := time.Now()
	_, err = l.Acquire(ctx, name, dlock.WithWait(300*time.Millisecond))
	took := time.Since(start)
	srv.Resume()
	if err == nil || !errors.Is(err, dlock.ErrBackend) {
		t.Fatalf("Acquire against a paused server = %v, want ErrBackend", err)
	}
	if took > 2*time.Second {
		t.Errorf("Acquire with a 300ms wait returned after %s", took)
	}
	deadline := time.Now().Add(3 * time.Second)
	for {
		children, _, err := admin.Children(lockDir(name))
		if (err == nil && len(children) == 0) || errors.Is(err, zk.ErrNoNode) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("phantom node(s) %v left 3s after the server resumed", children)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if conn.SessionID() != session {
		t.Errorf("the session changed: the clean-up proves nothing")
	}
}
